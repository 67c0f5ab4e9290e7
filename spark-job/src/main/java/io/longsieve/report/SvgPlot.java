package io.longsieve.report;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * One inline SVG chart: a plot area with linear (or log10) scales, gridded axes and drawing primitives. The charts
 * ({@link BarChart}, {@link Histogram}, {@link ScatterChart}, {@link Heatmap}) draw into it; nothing here is
 * interactive, tooltips are SVG {@code <title>} elements so the page needs no script and works offline.
 */
final class SvgPlot {

  /** Okabe–Ito colours: distinguishable with the common colour-vision deficiencies. */
  static final String[] PALETTE = {"#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
      "#000000"};

  final int width;
  final int height;
  final int left;
  final int right;
  final int top;
  final int bottom;
  private final String kind;
  private final String title;
  private final StringBuilder body = new StringBuilder();
  private double xMin = 0;
  private double xMax = 1;
  private double yMin = 0;
  private double yMax = 1;
  private boolean xLog;
  private boolean yLog;

  /** {@code kind} names the chart type in a data attribute (the browser test finds charts by it). */
  SvgPlot(String kind, String title, int width, int height, int left, int right, int top, int bottom) {
    this.kind = kind;
    this.title = title;
    this.width = width;
    this.height = height;
    this.left = left;
    this.right = right;
    this.top = top;
    this.bottom = bottom;
  }

  SvgPlot xScale(double min, double max, boolean log) {
    xLog = log && min > 0;
    xMin = xLog ? Math.log10(min) : min;
    xMax = xLog ? Math.log10(max) : max;
    if (xMax <= xMin) {
      xMax = xMin + 1;
    }
    return this;
  }

  SvgPlot yScale(double min, double max, boolean log) {
    yLog = log && min > 0;
    yMin = yLog ? Math.log10(min) : min;
    yMax = yLog ? Math.log10(max) : max;
    if (yMax <= yMin) {
      yMax = yMin + 1;
    }
    return this;
  }

  double px(double x) {
    double v = xLog ? Math.log10(x) : x;
    return left + (v - xMin) / (xMax - xMin) * (width - left - right);
  }

  double py(double y) {
    double v = yLog ? Math.log10(y) : y;
    return height - bottom - (v - yMin) / (yMax - yMin) * (height - top - bottom);
  }

  /** Bottom axis: grid lines at round values, tick labels, and the axis title. */
  void xAxis(String label) {
    for (double t : ticks(xMin, xMax, xLog, Math.max(2, (width - left - right) / 90))) {
      double x = px(t);
      line(x, top, x, height - bottom, "#e3e3e3");
      text(x, height - bottom + 16, Html.num(t), "middle", "tick");
    }
    line(left, height - bottom, width - right, height - bottom, "#888");
    text(left + (width - left - right) / 2.0, height - bottom + 34, label, "middle", "axis");
  }

  /** Left axis: grid lines at round values, tick labels, and the axis title (rotated). */
  void yAxis(String label) {
    for (double t : ticks(yMin, yMax, yLog, Math.max(2, (height - top - bottom) / 50))) {
      double y = py(t);
      line(left, y, width - right, y, "#e3e3e3");
      text(left - 6, y + 4, Html.num(t), "end", "tick");
    }
    line(left, top, left, height - bottom, "#888");
    body.append(String.format(Locale.ROOT,
        "<text class=\"axis\" text-anchor=\"middle\" transform=\"translate(%.1f,%.1f) rotate(-90)\">%s</text>",
        14.0, top + (height - top - bottom) / 2.0, Html.escape(label)));
  }

  void rect(double x, double y, double w, double h, String fill, String tooltip) {
    body.append(String.format(Locale.ROOT, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">",
        x, y, Math.max(w, 0.5), Math.max(h, 0.5), fill));
    tooltip(tooltip);
    body.append("</rect>");
  }

  /** A point; its colour comes from the enclosing {@link #beginGroup} (one fill per series keeps big plots small). */
  void circle(double x, double y, double r, String tooltip) {
    body.append(String.format(Locale.ROOT, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\">", x, y, r));
    tooltip(tooltip);
    body.append("</circle>");
  }

  void beginGroup(String fill, double opacity) {
    body.append(String.format(Locale.ROOT, "<g fill=\"%s\" fill-opacity=\"%.2f\">", fill, opacity));
  }

  void endGroup() {
    body.append("</g>");
  }

  void line(double x1, double y1, double x2, double y2, String stroke) {
    body.append(String.format(Locale.ROOT,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1\"/>", x1, y1, x2, y2,
        stroke));
  }

  /** A dashed vertical marker across the plot area, its label {@code dy} below the top (percentiles on histograms). */
  void marker(double x, int dy, String label, String stroke) {
    body.append(String.format(Locale.ROOT,
        "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" stroke-width=\"1.5\" stroke-dasharray=\"4 3\"/>",
        x, top, x, height - bottom, stroke));
    boolean room = x + 4 + 7 * label.length() < width - right;
    text(room ? x + 3 : x - 3, top + 10 + dy, label, room ? "start" : "end", "marker");
  }

  /** A polyline through points in data coordinates (NaN points are skipped). */
  void path(double[] xs, double[] ys, String stroke) {
    StringBuilder d = new StringBuilder();
    for (int i = 0; i < xs.length; i++) {
      if (Double.isNaN(xs[i]) || Double.isNaN(ys[i])) {
        continue;
      }
      d.append(d.length() == 0 ? "M" : " L").append(String.format(Locale.ROOT, "%.1f %.1f", px(xs[i]), py(ys[i])));
    }
    if (d.length() > 0) {
      body.append("<path d=\"").append(d).append("\" fill=\"none\" stroke=\"").append(stroke)
          .append("\" stroke-width=\"2\"/>");
    }
  }

  void text(double x, double y, String s, String anchor, String cssClass) {
    body.append(String.format(Locale.ROOT, "<text class=\"%s\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">%s</text>",
        cssClass, x, y, anchor, Html.escape(s)));
  }

  /** A legend row of coloured swatches at the top right, one per series. */
  void legend(List<String> names) {
    double x = width - right;
    for (int i = names.size() - 1; i >= 0; i--) {
      String name = Html.truncate(names.get(i), 32);
      x -= 14 + 7 * name.length();
      rect(x, 6, 10, 10, PALETTE[i % PALETTE.length], names.get(i));
      text(x + 14, 15, name, "start", "legend");
      x -= 10;
    }
  }

  private void tooltip(String tooltip) {
    if (tooltip != null) {
      body.append("<title>").append(Html.escape(tooltip)).append("</title>");
    }
  }

  String toSvg() {
    return String.format(Locale.ROOT,
        "<svg class=\"chart\" data-chart=\"%s\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" "
            + "width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"%s\"><title>%s</title>%s</svg>",
        kind, width, height, width, height, Html.escape(title), Html.escape(title), body);
  }

  /** Round tick values (1, 2, 5 × 10^k steps) between min and max; in log space, the powers of ten. */
  static List<Double> ticks(double min, double max, boolean log, int approxCount) {
    List<Double> out = new ArrayList<>();
    if (log) {
      for (double e = Math.ceil(min); e <= max + 1e-9; e++) {
        out.add(Math.pow(10, e));
      }
      if (out.size() >= 2) {
        return out;
      }
      out.clear();
      min = Math.pow(10, min);
      max = Math.pow(10, max);
    }
    double span = max - min;
    double raw = span / Math.max(1, approxCount);
    double mag = Math.pow(10, Math.floor(Math.log10(raw)));
    double step = raw / mag < 1.5 ? mag : raw / mag < 3.5 ? 2 * mag : raw / mag < 7.5 ? 5 * mag : 10 * mag;
    for (double t = Math.ceil(min / step) * step; t <= max + step * 1e-9; t += step) {
      out.add(Math.abs(t) < step * 1e-9 ? 0.0 : t);
    }
    return out;
  }
}
