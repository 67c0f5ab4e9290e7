package io.longsieve.report;

import java.util.ArrayList;
import java.util.List;

/** Points per series (sampled, capped) plus a line through the binned medians of all the series' documents. */
final class ScatterChart {

  private ScatterChart() {}

  /**
   * One series: sampled points and, where known, the per-bin median line computed over every document.
   *
   * @param xs     sampled points' x (length n)
   * @param ys     sampled points' y (length n)
   * @param lineXs bin centres of the median line (may be empty)
   * @param lineYs bin medians (same length as lineXs)
   */
  record Series(String name, double[] xs, double[] ys, double[] lineXs, double[] lineYs) {}

  static String render(String kind, String title, List<Series> series, String xLabel, String yLabel, boolean logX) {
    double xMin = Double.MAX_VALUE;
    double xMax = -Double.MAX_VALUE;
    double yMax = 0;
    for (Series s : series) {
      for (int i = 0; i < s.xs().length; i++) {
        xMin = Math.min(xMin, s.xs()[i]);
        xMax = Math.max(xMax, s.xs()[i]);
        yMax = Math.max(yMax, s.ys()[i]);
      }
    }
    if (xMin > xMax) {
      xMin = 1;
      xMax = 10;
    }
    boolean log = logX && xMin > 0 && xMax / xMin > 20;
    SvgPlot p = new SvgPlot(kind, title, 640, 320, 64, 20, 26, 48);
    p.xScale(log ? xMin / 1.2 : Math.min(0, xMin), xMax * (log ? 1.2 : 1.05), log).yScale(0, yMax * 1.08 + 1e-9, false);
    p.yAxis(yLabel);
    p.xAxis(xLabel + (log ? " (log scale)" : ""));
    List<String> names = new ArrayList<>();
    for (int k = 0; k < series.size(); k++) {
      Series s = series.get(k);
      String colour = SvgPlot.PALETTE[k % SvgPlot.PALETTE.length];
      names.add(s.name());
      p.beginGroup(colour, 0.55);
      for (int i = 0; i < s.xs().length; i++) {
        p.circle(p.px(s.xs()[i]), p.py(s.ys()[i]), 2.5, Html.num(s.xs()[i]) + " → " + Html.num(s.ys()[i]));
      }
      p.endGroup();
      p.path(s.lineXs(), s.lineYs(), colour);
    }
    p.legend(names);
    return p.toSvg();
  }
}
