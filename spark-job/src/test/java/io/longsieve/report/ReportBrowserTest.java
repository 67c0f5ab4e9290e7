package io.longsieve.report;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.longsieve.job.JobCli;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.logging.Level;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
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
 * Opens generated reports in a real headless Chromium (Debian's chromium + chromium-driver; .ci/run installs them),
 * checks that every chart drew marks and that the console has no errors, and saves full-page screenshots under
 * {@code target/}: {@code report-screenshot.png} of a real run (the job on the tiny test model, CPU) and
 * {@code report-screenshot-synthetic.png} of the synthetic run that has every view (three policies, an eval).
 * Without Chromium the tests are skipped, unless LONGSIEVE_REQUIRE_BROWSER=1 (CI) makes that a failure.
 */
class ReportBrowserTest {

  static final Path CHROMIUM = Path.of(System.getProperty("longsieve.chromium", "/usr/bin/chromium"));
  static final Path CHROMEDRIVER = Path.of(System.getProperty("longsieve.chromedriver", "/usr/bin/chromedriver"));
  static final Path MODEL = Path.of("..", "gpu-engine", "src", "test", "resources", "models", "llama-gqa")
      .toAbsolutePath().normalize();
  /** Charts of any run with timings: status, latency, speed, policy and executor views. */
  static final List<String> BASE_CHARTS = List.of("status", "hist-total", "hist-ttft", "scatter-decode",
      "scatter-prefill", "policy-p50", "policy-decode", "executor-busy", "executor-rate");
  /** Charts that need sparse policies (per-layer selection) and an eval. */
  static final List<String> SPARSE_AND_EVAL_CHARTS = List.of("heatmap-layers", "eval-policy", "eval-heatmap");

  static ChromeDriver driver;

  @BeforeAll
  static void startBrowser(@TempDir Path profile) {
    boolean present = Files.isExecutable(CHROMIUM) && Files.isExecutable(CHROMEDRIVER);
    if (!present && "1".equals(System.getenv("LONGSIEVE_REQUIRE_BROWSER"))) {
      fail("LONGSIEVE_REQUIRE_BROWSER=1 but " + CHROMIUM + " or " + CHROMEDRIVER + " is missing");
    }
    assumeTrue(present, "needs " + CHROMIUM + " and " + CHROMEDRIVER + " (apt-get install chromium chromium-driver)");
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
    driver = new ChromeDriver(service, options);
    driver.manage().window().setSize(new Dimension(1440, 900)); // a laptop screen
  }

  @AfterAll
  static void quitBrowser() {
    if (driver != null) {
      driver.quit();
    }
  }

  @Test
  void reportOfARealJobRunRenders(@TempDir Path dir) throws Exception {
    Path out = dir.resolve("out");
    int rc = JobCli.commandLine().execute("run", "--model", MODEL.toString(), "--master", "local[2]",
        "--max-new-tokens", "8", "--device", "cpu", "--conf", "spark.longsieve.threads=1",
        "--conf", "spark.longsieve.maxContext=1024", "--input", sampleInput(dir).toString(),
        "--output", out.toString(), "--run-id", "sample-run", "--max-docs", "10", "--audit-fraction", "0.5");
    assertEquals(0, rc, "longsieve run");
    Path report;
    SparkSession spark = ReportFixture.spark();
    try {
      report = RunReport.write(spark, out, "sample-run");
    } finally {
      spark.stop();
    }

    open(report, "LongSieve run sample-run");
    saveFullPageScreenshot(Path.of("target", "report-screenshot.png")); // first, so a failure has a picture too
    assertChartsRendered(BASE_CHARTS);
    assertNoScriptsAndNoConsoleErrors();
    assertOverviewRendered();
  }

  /** The overview of the real run: what ran, the budget notice, the audit, tasks with accuracy, answers. */
  private static void assertOverviewRendered() {
    String head = visibleText("#runhead");
    for (String f : new String[] {"model", "policy", "input", "backend"}) {
      assertTrue(head.contains(f) && !head.contains("not recorded"), "header names the " + f + ": " + head);
    }
    assertTrue(head.contains("llama-gqa") && head.contains("dense") && head.contains("docs.jsonl") && head.contains("cpu"), head);
    String budget = visibleText("#budget");
    assertTrue(budget.contains("Run budget spent") && budget.contains("--max-docs 10") && budget.contains("--resume"), budget);
    String audit = visibleText("#audit");
    assertTrue(audit.contains("Shadow audit against dense attention") && audit.contains("100.0%"), audit);
    // a dense run against dense: no KL, every top-1 token agrees
    assertTrue(audit.contains("mean KL(dense ‖ policy) per token") && audit.contains("0.0000")
        && audit.contains("top-1 agreement with dense"), audit);
    List<WebElement> taskRows = driver.findElements(By.cssSelector("table.tasks tr"));
    assertTrue(taskRows.size() >= 3, "a header and a row per task");
    String tasks = visibleText("table.tasks");
    assertTrue(tasks.contains("qa") && tasks.contains("summary") && tasks.contains("exact match"), tasks);
    List<WebElement> answers = driver.findElements(By.cssSelector("table.answers tr"));
    assertTrue(answers.size() >= 2, "sample answers");
    // the qa rows carry a reference, shown next to the answer and sorted first
    assertTrue(answers.get(1).getText().contains("the council"), answers.get(1).getText());
  }

  private static String visibleText(String css) {
    List<WebElement> found = driver.findElements(By.cssSelector(css));
    assertEquals(1, found.size(), css);
    assertTrue(found.get(0).isDisplayed() && found.get(0).getRect().getHeight() > 0, css + " is on screen");
    return found.get(0).getText();
  }

  @Test
  void everyViewOfTheSyntheticRunRenders(@TempDir Path out) throws Exception {
    Path report;
    SparkSession spark = ReportFixture.spark();
    try {
      ReportFixture.writeRun(spark, out, "20261129-080000-sample", 3000, 240_000);
      ReportFixture.writeEval(spark, out, "20261129-080000-sample");
      report = RunReport.write(spark, out, "20261129-080000-sample");
    } finally {
      spark.stop();
    }

    open(report, "LongSieve run 20261129-080000-sample");
    saveFullPageScreenshot(Path.of("target", "report-screenshot-synthetic.png"));
    assertChartsRendered(BASE_CHARTS);
    assertChartsRendered(SPARSE_AND_EVAL_CHARTS);
    assertNoScriptsAndNoConsoleErrors();
  }

  /**
   * Twelve documents from a few words to a few hundred, and rows the job turns into statuses: too long for
   * the context, unparseable JSON, a duplicate id, and a doc id holding HTML.
   */
  private static Path sampleInput(Path dir) throws Exception {
    String[] pool = {"river", "harbour", "council", "budget", "winter", "station", "market", "school", "bridge",
        "farm", "the", "of", "approved", "north", "quiet"};
    List<String> lines = new ArrayList<>();
    for (int i = 0; i < 12; i++) {
      int words = (int) Math.round(8 * Math.pow(1.4, i)); // 8 … ~330 words
      StringBuilder text = new StringBuilder();
      for (int w = 0; w < words; w++) {
        text.append(w == 0 ? "" : " ").append(pool[(w * 7 + i) % pool.length]);
      }
      String task = i % 3 == 0 ? "qa" : "summary";
      lines.add("{\"doc_id\":\"doc-" + i + "\",\"task\":\"" + task + "\",\"text\":\"" + text + "\""
          + (task.equals("qa") ? ",\"question\":\"What was approved?\",\"reference\":\"the council\"" : "") + "}");
    }
    lines.add("{\"doc_id\":\"too-long\",\"task\":\"summary\",\"text\":\"" + "budget ".repeat(3000) + "\"}");
    lines.add("{this is not json");
    lines.add("{\"doc_id\":\"doc-1\",\"task\":\"summary\",\"text\":\"the same id again\"}");
    lines.add("{\"doc_id\":\"<b>bold</b>\",\"task\":\"nonsense\",\"text\":\"an unknown task\"}");
    Path input = dir.resolve("docs.jsonl");
    Files.writeString(input, String.join("\n", lines) + "\n", StandardCharsets.UTF_8);
    return input;
  }

  private static void open(Path report, String title) {
    driver.get(report.toUri().toString());
    assertEquals(title, driver.getTitle());
  }

  private static void assertChartsRendered(List<String> kinds) {
    for (String kind : kinds) {
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
  }

  private static void assertNoScriptsAndNoConsoleErrors() {
    assertEquals(0L, (Long) driver.executeScript("return document.querySelectorAll('script').length"),
        "user data holding HTML stays text");
    List<LogEntry> severe = driver.manage().logs().get(LogType.BROWSER).getAll().stream()
        .filter(e -> e.getLevel().intValue() >= Level.SEVERE.intValue()).toList();
    assertTrue(severe.isEmpty(), "console errors: " + severe);
  }

  /** Chrome's WebDriver screenshots stop at the viewport; the DevTools capture with a clip takes the whole page. */
  @SuppressWarnings("unchecked")
  private static void saveFullPageScreenshot(Path file) throws Exception {
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
