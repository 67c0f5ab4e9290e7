package io.longsieve.report;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.logging.Level;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.openqa.selenium.By;
import org.openqa.selenium.Dimension;
import org.openqa.selenium.WebElement;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.chrome.ChromeDriverService;
import org.openqa.selenium.chrome.ChromeOptions;
import org.openqa.selenium.logging.LogEntry;
import org.openqa.selenium.logging.LogType;
import org.openqa.selenium.logging.LoggingPreferences;

/**
 * Opens a generated report in a real headless Chromium (Debian's chromium + chromium-driver; .ci/run installs them),
 * checks that every chart drew marks and that the console has no errors, and saves a full-page screenshot to
 * {@code target/report-screenshot.png}. Without Chromium the test is skipped, unless LONGSIEVE_REQUIRE_BROWSER=1 (CI)
 * makes that a failure.
 */
class ReportBrowserTest {

  static final Path CHROMIUM = Path.of(System.getProperty("longsieve.chromium", "/usr/bin/chromium"));
  static final Path CHROMEDRIVER = Path.of(System.getProperty("longsieve.chromedriver", "/usr/bin/chromedriver"));
  /** Every chart a report with sparse policies, errors and an eval draws. */
  static final List<String> CHARTS = List.of("status", "hist-total", "hist-ttft", "scatter-decode", "scatter-prefill",
      "heatmap-layers", "policy-p50", "policy-decode", "eval-policy", "eval-heatmap", "executor-busy",
      "executor-rate");

  @Test
  void everyChartRendersInChromiumWithoutConsoleErrors(@TempDir Path out, @TempDir Path profile) throws Exception {
    boolean present = Files.isExecutable(CHROMIUM) && Files.isExecutable(CHROMEDRIVER);
    if (!present && "1".equals(System.getenv("LONGSIEVE_REQUIRE_BROWSER"))) {
      fail("LONGSIEVE_REQUIRE_BROWSER=1 but " + CHROMIUM + " or " + CHROMEDRIVER + " is missing");
    }
    assumeTrue(present, "needs " + CHROMIUM + " and " + CHROMEDRIVER + " (apt-get install chromium chromium-driver)");

    Path report = sampleReport(out);

    ChromeDriverService service = new ChromeDriverService.Builder()
        .usingDriverExecutable(CHROMEDRIVER.toFile()).usingAnyFreePort().build();
    ChromeOptions options = new ChromeOptions();
    options.setBinary(CHROMIUM.toFile());
    options.addArguments("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
        "--user-data-dir=" + profile);
    LoggingPreferences logs = new LoggingPreferences();
    logs.enable(LogType.BROWSER, Level.ALL);
    options.setCapability("goog:loggingPrefs", logs);
    ChromeDriver driver = new ChromeDriver(service, options);
    try {
      driver.manage().window().setSize(new Dimension(1440, 900)); // a laptop screen
      driver.get(report.toUri().toString());

      assertEquals("LongSieve run 20261129-080000-sample", driver.getTitle());
      for (String kind : CHARTS) {
        List<WebElement> found = driver.findElements(By.cssSelector("svg.chart[data-chart='" + kind + "']"));
        assertEquals(1, found.size(), "chart " + kind);
        WebElement svg = found.get(0);
        assertTrue(svg.getRect().getWidth() > 200 && svg.getRect().getHeight() > 80, kind + " has a size on screen");
        // marks that the browser actually laid out: a positive bounding box
        Number drawn = (Number) driver.executeScript("return Array.from(arguments[0].querySelectorAll("
            + "'rect,circle,path')).filter(e => { const b = e.getBBox(); return b.width > 0 || b.height > 0; })"
            + ".length", svg);
        assertTrue(drawn.intValue() > 0, kind + " drew marks");
      }
      assertEquals(0L, (Long) driver.executeScript("return document.querySelectorAll('script').length"),
          "user data (a doc id holding <script>) stays text");

      List<LogEntry> severe = driver.manage().logs().get(LogType.BROWSER).getAll().stream()
          .filter(e -> e.getLevel().intValue() >= Level.SEVERE.intValue()).toList();
      assertTrue(severe.isEmpty(), "console errors: " + severe);

      saveFullPageScreenshot(driver, Path.of("target", "report-screenshot.png"));
    } finally {
      driver.quit();
    }
  }

  /** A report over a sample run: the fixture's synthetic run with an eval. */
  private static Path sampleReport(Path out) throws Exception {
    SparkSession spark = ReportFixture.spark();
    try {
      ReportFixture.writeRun(spark, out, "20261129-080000-sample", 3000, 240_000);
      ReportFixture.writeEval(spark, out, "20261129-080000-sample");
      return RunReport.write(spark, out, "20261129-080000-sample");
    } finally {
      spark.stop();
    }
  }

  /** Chrome's WebDriver screenshots stop at the viewport; the DevTools capture with a clip takes the whole page. */
  @SuppressWarnings("unchecked")
  private static void saveFullPageScreenshot(ChromeDriver driver, Path file) throws Exception {
    Map<String, Object> metrics = driver.executeCdpCommand("Page.getLayoutMetrics", Map.of());
    Map<String, Object> size = (Map<String, Object>) metrics.get("cssContentSize");
    double width = ((Number) size.get("width")).doubleValue();
    double height = ((Number) size.get("height")).doubleValue();
    Map<String, Object> shot = driver.executeCdpCommand("Page.captureScreenshot", Map.of("format", "png",
        "captureBeyondViewport", true,
        "clip", Map.of("x", 0, "y", 0, "width", width, "height", height, "scale", 1)));
    Files.createDirectories(file.toAbsolutePath().getParent());
    Files.write(file, Base64.getDecoder().decode((String) shot.get("data")));
  }
}
