package io.longsieve.report;

import java.util.List;

/** Counts over equal-width bins, with dashed percentile markers (p50/p95/p99). */
final class Histogram {

  private Histogram() {}

  /** A labelled vertical marker, e.g. ("p95", 812.0). */
  record Marker(String label, double value) {}

  /**
   * @param edges  bin edges, length = counts.length + 1, ascending
   * @param counts documents per bin
   * @param logX   bins are equal in log space: draw the x axis in log scale
   */
  static String render(String kind, String title, double[] edges, long[] counts, boolean logX, String xLabel,
      List<Marker> markers) {
    SvgPlot p = new SvgPlot(kind, title, 640, 280, 64, 20, 22, 48);
    long max = 1;
    for (long c : counts) {
      max = Math.max(max, c);
    }
    p.xScale(edges[0], edges[edges.length - 1], logX).yScale(0, Math.max(5, max * 1.08), false); // at least 0..5: whole-document ticks
    p.yAxis("documents");
    p.xAxis(xLabel + (logX ? " (log scale)" : ""));
    for (int i = 0; i < counts.length; i++) {
      if (counts[i] == 0) {
        continue;
      }
      double x0 = p.px(edges[i]);
      double x1 = p.px(edges[i + 1]);
      double y = p.py(counts[i]);
      p.rect(x0 + 0.5, y, x1 - x0 - 1, p.py(0) - y, SvgPlot.PALETTE[0],
          Html.num(edges[i]) + "–" + Html.num(edges[i + 1]) + ": " + Html.num(counts[i]) + " documents");
    }
    String[] colours = {"#009E73", "#E69F00", "#D55E00"};
    for (int i = 0; i < markers.size(); i++) {
      Marker m = markers.get(i);
      if (!Double.isNaN(m.value())) {
        p.marker(p.px(m.value()), i * 12, m.label() + " " + Html.num(m.value()), colours[i % colours.length]);
      }
    }
    return p.toSvg();
  }
}
