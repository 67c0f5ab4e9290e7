package io.longsieve.report;

import java.util.List;

/** Horizontal bars, one per category (policies, executors, statuses): long labels stay readable on the left. */
final class BarChart {

  /** Longest label drawn in full; longer ones are cut (the tooltip has them whole). */
  static final int LABEL = 48;

  private BarChart() {}

  /** A bar: its label, value, and an optional tooltip (null = label and value). */
  record Bar(String label, double value, String tooltip) {}

  /**
   * @param kind        data-chart attribute value, unique per chart on the page
   * @param valueLabel  axis title for the values
   * @param colourBy    0 = one colour for all bars; 1 = a palette colour per bar
   */
  static String render(String kind, String title, List<Bar> bars, String valueLabel, int colourBy) {
    int maxLabel = bars.stream().mapToInt(b -> Html.truncate(b.label(), LABEL).length()).max().orElse(4);
    int left = Math.min(320, 16 + 6 * maxLabel);
    int rowH = bars.size() > 24 ? 14 : 24;
    int height = 56 + rowH * Math.max(2, bars.size());
    double max = bars.stream().mapToDouble(Bar::value).filter(v -> !Double.isNaN(v)).max().orElse(1);
    SvgPlot p = new SvgPlot(kind, title, 440 + left, height, left, 40, 10, 44);
    p.xScale(0, max > 0 ? max * 1.05 : 1, false);
    p.xAxis(valueLabel);
    for (int i = 0; i < bars.size(); i++) {
      Bar b = bars.get(i);
      double y = 10 + i * rowH;
      String colour = colourBy == 0 ? SvgPlot.PALETTE[0] : SvgPlot.PALETTE[i % SvgPlot.PALETTE.length];
      String tip = b.tooltip() != null ? b.tooltip() : b.label() + ": " + Html.num(b.value());
      double v = Double.isNaN(b.value()) ? 0 : b.value();
      p.rect(left, y + rowH * 0.15, p.px(v) - left, rowH * 0.7, colour, tip);
      p.text(left - 6, y + rowH * 0.5 + 4, Html.truncate(b.label(), LABEL), "end", "tick");
      if (rowH >= 20) {
        p.text(p.px(v) + 4, y + rowH * 0.5 + 4, Html.num(b.value()), "start", "value");
      }
    }
    return p.toSvg();
  }
}
