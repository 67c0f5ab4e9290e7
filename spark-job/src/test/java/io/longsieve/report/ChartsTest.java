package io.longsieve.report;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.report.BarChart.Bar;
import io.longsieve.report.Histogram.Marker;
import java.util.List;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** The SVG charts draw what they are given, escape labels, and pick round axis ticks. */
class ChartsTest {

  private static int count(String svg, String element) {
    return (int) Pattern.compile("<" + element + "[ >]").matcher(svg).results().count();
  }

  @Test
  void barChartDrawsOneBarPerCategoryAndEscapesLabels() {
    String svg = BarChart.render("bars", "t", List.of(new Bar("ok", 90, null), new Bar("<b>x</b>", 10, null)),
        "documents", 1);
    assertTrue(svg.startsWith("<svg class=\"chart\" data-chart=\"bars\""));
    assertEquals(2, count(svg, "rect"));
    assertTrue(svg.contains("&lt;b&gt;x&lt;/b&gt;"));
    assertFalse(svg.contains("<b>"));
  }

  @Test
  void histogramSkipsEmptyBinsAndDrawsPercentileMarkers() {
    String svg = Histogram.render("h", "t", new double[] {0, 10, 20, 30}, new long[] {5, 0, 2}, false, "ms",
        List.of(new Marker("p50", 8), new Marker("p95", 25), new Marker("p99", Double.NaN)));
    assertEquals(2, count(svg, "rect"));
    assertTrue(svg.contains(">p50 8<") && svg.contains(">p95 25<"));
    assertFalse(svg.contains("p99"));
  }

  @Test
  void scatterDrawsEveryPointAndOneMedianLinePerSeries() {
    var a = new ScatterChart.Series("dense", new double[] {512, 4096, 65536}, new double[] {50, 40, 10},
        new double[] {600, 5000}, new double[] {48, 39});
    var b = new ScatterChart.Series("sparse", new double[] {1024}, new double[] {55}, new double[0], new double[0]);
    String svg = ScatterChart.render("s", "t", List.of(a, b), "input tokens", "tok/s", true);
    assertEquals(4, count(svg, "circle"));
    assertEquals(1, count(svg, "path"));
    assertTrue(svg.contains("(log scale)"), "input lengths over 2+ decades get a log axis");
  }

  @Test
  void heatmapLeavesMissingCellsBlank() {
    double[][] v = {{1.0, 0.2, 0.1}, {Double.NaN, 0.5, 0.0}};
    String svg = Heatmap.render("hm", "t", List.of("a", "b"), List.of("0", "1", "2"), v, "layer");
    assertEquals(5 + 10, count(svg, "rect"), "five cells plus the ten-step colour key");
    assertEquals("#f1f7fd", Heatmap.colour(0));
    assertEquals("#08306b", Heatmap.colour(1.5));
  }

  @Test
  void ticksAreRoundNumbers() {
    assertEquals(List.of(0.0, 20.0, 40.0, 60.0, 80.0, 100.0), SvgPlot.ticks(0, 100, false, 5));
    assertEquals(List.of(100.0, 1000.0, 10000.0), SvgPlot.ticks(2, 4, true, 5));
  }

  @Test
  void escapeCoversHtmlAttributesAndControlCharacters() {
    assertEquals("&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;\uFFFD", Html.escape("<a href=\"x\" title='y'>&\u0001"));
    assertEquals("12,345", Html.num(12345L));
    assertEquals("15 s", Html.duration(15_000));
    assertEquals("25 min", Html.duration(1_500_000));
  }
}
