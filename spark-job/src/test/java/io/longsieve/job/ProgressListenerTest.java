package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.job.JobMetrics.Counts;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.scheduler.AccumulableInfo;
import org.apache.spark.scheduler.SparkListenerExecutorMetricsUpdate;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import scala.Option;
import scala.Tuple4;
import scala.jdk.javaapi.CollectionConverters;

/** Progress lines from the job's accumulators, live heartbeats included. */
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
  void etaIsUnknownBeforeAnythingFinishes() {
    assertTrue(ProgressListener.progressLine(Counts.ZERO, 5_000_000_000L, 0, 0).endsWith("ETA unknown"));
    assertEquals("1:01:01", ProgressListener.hms(3661));
  }
}
