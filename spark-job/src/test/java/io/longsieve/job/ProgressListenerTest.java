package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.job.JobMetrics.Counts;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.logging.log4j.Level;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.scheduler.AccumulableInfo;
import org.apache.spark.scheduler.SparkListenerExecutorMetricsUpdate;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import scala.Option;
import scala.Tuple4;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Progress lines from the job's accumulators, live heartbeats included: failed rows counted on every
 * path, the first line within 5 s and then one per interval, counts apart from the cost-weighted share.
 */
class ProgressListenerTest {

  static SparkSession spark;
  static JavaSparkContext sc;

  @BeforeAll
  static void start() {
    spark = SparkSession.builder().master("local[2]").appName("progress-test")
        .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate();
    sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
  }

  @AfterAll
  static void stop() {
    spark.stop();
  }

  @Test
  void summaryCountsEveryDocumentOnceAfterAJob() {
    JobMetrics m = JobMetrics.register(sc.sc());
    ProgressListener listener = new ProgressListener(m, 100, 0);
    sc.sc().addSparkListener(listener);
    try {
      sc.parallelize(java.util.stream.IntStream.range(0, 100).boxed().toList(), 4)
          .foreach(i -> m.record(i % 10 != 0, 1000, 20, 1000));
      String line = listener.progressLine();
      assertTrue(line.startsWith("progress: 100/100 docs, 100.0% of the estimated work, 10 failed"), line);
      String summary = listener.summaryLine();
      assertTrue(summary.startsWith("summary: 100 docs (90 ok, 10 failed)"), summary);
      assertTrue(summary.contains("100,000 tokens in") && summary.contains("2,000 tokens out"), summary);
    } finally {
      sc.sc().removeSparkListener(listener);
      listener.close();
    }
  }

  @Test
  void runningTasksCountFromTheirLastHeartbeatUntilTheyEnd() {
    JobMetrics m = JobMetrics.register(sc.sc());
    AtomicLong now = new AtomicLong(0);
    ProgressListener listener = new ProgressListener(m, 10, 1000, now::get);
    long[] ids = m.ids();
    // task 7 has finished 3 documents worth 600 cost units, 40 tokens out, one failed
    long[] values = {3, 1, 3000, 40, 600};
    List<AccumulableInfo> infos = new java.util.ArrayList<>();
    for (int i = 0; i < ids.length; i++) {
      infos.add(new AccumulableInfo(ids[i], Option.apply("x"), Option.apply(values[i]), Option.apply(values[i]),
          false, false, Option.empty()));
    }
    var update = new Tuple4<Object, Object, Object, scala.collection.immutable.Seq<AccumulableInfo>>(
        7L, 0, 0, CollectionConverters.asScala(infos).toSeq());
    listener.onExecutorMetricsUpdate(new SparkListenerExecutorMetricsUpdate("1",
        CollectionConverters.asScala(List.of(update)).toSeq(), new scala.collection.mutable.HashMap<>()));
    now.set(20_000_000_000L); // 20 s later
    assertEquals(new Counts(3, 1, 3000, 40, 600), listener.current());
    String line = listener.progressLine();
    // 60% of the cost is done in 20 s, so about 13 s are left
    assertTrue(line.contains("3/10 docs, 60.0% of the estimated work") && line.contains("2.0 tok/s out") && line.endsWith("ETA 0:00:13"), line);
  }

  @Test
  void aRunsProgressCountsEveryFailedRowAndLabelsCountsApartFromCostShare(@TempDir Path dir) {
    // two rows run, three are bad_input before the engine (not JSON, a qa row without a question, an
    // unknown task) and one is a duplicate_id: four rows failed, whatever path they took
    Path in = JobTestSupport.jsonl(dir, "docs.jsonl", JobTestSupport.json("a", "summary", "One two.", null),
        JobTestSupport.json("b", "summary", "Three.", null), "{not json", JobTestSupport.json("c", "qa", "No question.", null),
        JobTestSupport.json("a", "summary", "Again.", null), JobTestSupport.json("e", "nosuch", "x", null));
    try (LogCapture log = LogCapture.of(ProgressListener.class.getName(), Level.INFO)) {
      RunSummary s = LongSieveJob.run(spark, JobTestSupport.options(in, dir.resolve("out"), "progress",
          Map.of("spark.longsieve.progressIntervalSeconds", "1")));
      long failedRows = s.byStatus().entrySet().stream().filter(e -> !e.getKey().equals(JobSchemas.OK))
          .mapToLong(Map.Entry::getValue).sum();
      assertEquals(4, failedRows, s.line());
      List<String> lines = log.lines();
      String summary = lines.get(lines.size() - 1);
      assertTrue(summary.startsWith("summary: 6 docs (2 ok, 4 failed)"), summary);
      // a run this small may end before the first 1 s line (the interval itself is the next test's):
      // whatever progress lines came are held to the same counts
      List<String> progress = lines.stream().filter(l -> l.startsWith("progress: ")).toList();
      for (String l : progress) {
        // a count of documents, then the share of the estimated work: never one read as the other
        assertTrue(l.matches("progress: \\d+/6 docs, [0-9.]+% of the estimated work, \\d+ failed, .*"), l);
        long failed = Long.parseLong(l.replaceAll(".* (\\d+) failed.*", "$1"));
        long docs = Long.parseLong(l.replaceAll("progress: (\\d+)/.*", "$1"));
        assertTrue(failed <= docs && failed <= 4, l);
      }
      for (String l : progress) assertTrue(!l.startsWith("progress: 6/6") || l.contains(" 4 failed"), l);
    }
  }

  @Test
  void theFirstLineComesWithinFiveSecondsThenOneEveryInterval() throws Exception {
    JobMetrics m = JobMetrics.register(sc.sc());
    try (LogCapture log = LogCapture.of(ProgressListener.class.getName(), Level.INFO)) {
      long t0 = System.nanoTime();
      ProgressListener slow = new ProgressListener(m, 10, 0).start(Duration.ofSeconds(30));
      long firstMs = awaitLines(log, 1, 10_000, t0);
      slow.close();
      assertTrue(firstMs >= 4_500 && firstMs < 7_000, "the first line of a 30 s interval after " + firstMs + " ms");

      int before = log.lines().size(); // the summary of close() included
      long t1 = System.nanoTime();
      ProgressListener fast = new ProgressListener(m, 10, 0).start(Duration.ofSeconds(1));
      long thirdMs = awaitLines(log, before + 3, 10_000, t1);
      fast.close();
      assertTrue(thirdMs >= 2_500 && thirdMs < 6_000, "three lines of a 1 s interval after " + thirdMs + " ms");
    }
  }

  /** Milliseconds from {@code t0} until the capture holds {@code n} lines; fails after {@code timeoutMs}. */
  private static long awaitLines(LogCapture log, int n, long timeoutMs, long t0) throws InterruptedException {
    while (log.lines().size() < n) {
      long ms = (System.nanoTime() - t0) / 1_000_000;
      if (ms > timeoutMs) throw new AssertionError(n + " lines not logged in " + timeoutMs + " ms: " + log.lines());
      Thread.sleep(20);
    }
    return (System.nanoTime() - t0) / 1_000_000;
  }

  @Test
  void etaIsUnknownBeforeAnythingFinishes() {
    assertTrue(ProgressListener.progressLine(Counts.ZERO, 5_000_000_000L, 0, 0).endsWith("ETA unknown"));
    assertEquals("1:01:01", ProgressListener.hms(3661));
  }
}
