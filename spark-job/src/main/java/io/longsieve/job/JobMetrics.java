package io.longsieve.job;

import java.io.Serializable;
import org.apache.spark.SparkContext;
import org.apache.spark.util.LongAccumulator;

/**
 * The job's named accumulators: they show on the Spark UI's stage page (only named accumulators do)
 * and feed the driver's {@link ProgressListener}.
 *
 * <p>Failure semantics: executors add to them once per document; they are for live progress only.
 * Spark applies a result task's updates once per partition, but a failed attempt's partial counts
 * still appear in executor heartbeats while it runs, so a progress line may briefly overcount. The
 * authoritative counts are the rows of the output (and the run manifest), never these.
 */
public final class JobMetrics implements Serializable {

  public static final String PREFIX = "longsieve.";

  public final LongAccumulator docsDone;   // documents finished, any status
  public final LongAccumulator docsFailed; // documents finished with a status other than ok
  public final LongAccumulator tokensIn;   // prompt tokens of the documents that ran
  public final LongAccumulator tokensOut;  // generated tokens
  public final LongAccumulator costDone;   // CostModel units of finished documents, rounded

  private JobMetrics(SparkContext sc) {
    docsDone = sc.longAccumulator(PREFIX + "docs.done");
    docsFailed = sc.longAccumulator(PREFIX + "docs.failed");
    tokensIn = sc.longAccumulator(PREFIX + "tokens.in");
    tokensOut = sc.longAccumulator(PREFIX + "tokens.out");
    costDone = sc.longAccumulator(PREFIX + "cost.done");
  }

  /** Registers the accumulators with the driver's SparkContext. */
  public static JobMetrics register(SparkContext sc) {
    return new JobMetrics(sc);
  }

  /** Called on the executor when a document is finished. */
  public void record(boolean ok, long inputTokens, long outputTokens, double estimatedCost) {
    docsDone.add(1);
    if (!ok) docsFailed.add(1);
    tokensIn.add(Math.max(0, inputTokens));
    tokensOut.add(Math.max(0, outputTokens));
    costDone.add(Math.round(Math.max(0, estimatedCost)));
  }

  /** A snapshot of the values as the driver sees them (finished tasks only). */
  Counts driverValues() {
    return new Counts(docsDone.value(), docsFailed.value(), tokensIn.value(), tokensOut.value(), costDone.value());
  }

  /** Accumulator ids in {@link Counts} order, to pick our values out of heartbeats. */
  long[] ids() {
    return new long[] {docsDone.id(), docsFailed.id(), tokensIn.id(), tokensOut.id(), costDone.id()};
  }

  /** One set of the five values. */
  record Counts(long docs, long failed, long tokensIn, long tokensOut, long cost) {
    static final Counts ZERO = new Counts(0, 0, 0, 0, 0);

    Counts plus(Counts o) {
      return new Counts(docs + o.docs, failed + o.failed, tokensIn + o.tokensIn, tokensOut + o.tokensOut, cost + o.cost);
    }

    static Counts of(long[] v) {
      return new Counts(v[0], v[1], v[2], v[3], v[4]);
    }
  }
}
