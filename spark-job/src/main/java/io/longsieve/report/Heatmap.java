package io.longsieve.report;

import java.util.List;
import java.util.Locale;

/** A grid of coloured cells (rows × columns), value 0..1 on a light-to-dark blue scale; NaN cells stay blank. */
final class Heatmap {

  private Heatmap() {}

  /**
   * @param values (rows, cols) fractions in [0, 1]; NaN = no data
   * @param colTitle what the columns are (e.g. "layer")
   */
  static String render(String kind, String title, List<String> rowLabels, List<String> colLabels, double[][] values,
      String colTitle) {
    int maxLabel = rowLabels.stream().mapToInt(s -> Html.truncate(s, BarChart.LABEL).length()).max().orElse(4);
    int left = Math.min(320, 16 + 6 * maxLabel);
    int cols = Math.max(1, colLabels.size());
    int colLabel = colLabels.stream().mapToInt(String::length).max().orElse(1);
    // few columns: wide enough for their labels; many (layers): as wide as the page allows, labels thinned out
    int cellW = Math.max(6, Math.min(Math.max(40, 7 * colLabel + 8), (900 - left - 20) / cols));
    int cellH = 26;
    int width = left + cellW * cols + 20;
    int height = 40 + cellH * rowLabels.size() + 60;
    SvgPlot p = new SvgPlot(kind, title, Math.max(width, 420), height, left, 20, 10, 60);
    int labelEvery = Math.max(1, (int) Math.ceil((7.0 * colLabel + 8) / cellW));
    for (int c = 0; c < colLabels.size(); c++) {
      if (c % labelEvery == 0) {
        p.text(left + c * cellW + cellW / 2.0, 10 + cellH * rowLabels.size() + 14, colLabels.get(c), "middle", "tick");
      }
    }
    p.text(left + cellW * cols / 2.0, 10 + cellH * rowLabels.size() + 32, colTitle, "middle", "axis");
    for (int r = 0; r < rowLabels.size(); r++) {
      double y = 10 + r * cellH;
      p.text(left - 6, y + cellH / 2.0 + 4, Html.truncate(rowLabels.get(r), BarChart.LABEL), "end", "tick");
      for (int c = 0; c < colLabels.size(); c++) {
        double v = values[r][c];
        if (Double.isNaN(v)) {
          continue;
        }
        p.rect(left + c * cellW, y, cellW - 1, cellH - 1, colour(v),
            rowLabels.get(r) + ", " + colTitle + " " + colLabels.get(c) + ": " + Html.pct(v));
      }
    }
    // colour key: 0% … 100%
    double keyY = 10 + cellH * rowLabels.size() + 40;
    for (int i = 0; i < 10; i++) {
      p.rect(left + i * 16, keyY, 16, 10, colour(i / 9.0), null);
    }
    p.text(left - 6, keyY + 9, "0%", "end", "tick");
    p.text(left + 166, keyY + 9, "100%", "start", "tick");
    return p.toSvg();
  }

  /** Linear interpolation from a pale blue (0) to a dark blue (1), clamped. */
  static String colour(double v) {
    double t = Math.max(0, Math.min(1, v));
    int[] lo = {0xF1, 0xF7, 0xFD};
    int[] hi = {0x08, 0x30, 0x6B};
    return String.format(Locale.ROOT, "#%02x%02x%02x", mix(lo[0], hi[0], t), mix(lo[1], hi[1], t),
        mix(lo[2], hi[2], t));
  }

  private static int mix(int a, int b, double t) {
    return (int) Math.round(a + (b - a) * t);
  }
}
