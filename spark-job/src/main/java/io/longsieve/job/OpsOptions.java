package io.longsieve.job;

import java.io.Serializable;

/**
 * The options that keep a nightly run bounded and watched, part of {@link RunOptions} (keys
 * spark.longsieve.*, listed with {@code longsieve run --help}).
 *
 * @param resourceWaitSeconds how long a stage may wait for its first task while no executor offers what
 *                            its tasks ask for, before the driver fails the run ({@link ResourceWatchdog}); 0 = forever
 * @param maxTotalTokens      run budget of input + output tokens ({@link RunBudget}); 0 = none
 * @param maxDocs             run budget of documents sent to the engine; 0 = none
 * @param auditFraction       share of documents also run with dense attention ({@link ShadowAudit}); 0 = off
 * @param auditSeed           seed of the audit's sample (by doc_id), so a re-run audits the same documents
 * @param report              write the HTML report at the end of the run; false leaves it to {@code longsieve report}
 */
public record OpsOptions(
    int resourceWaitSeconds,
    long maxTotalTokens,
    long maxDocs,
    double auditFraction,
    long auditSeed,
    boolean report) implements Serializable {

  public static final OpsOptions DEFAULTS = new OpsOptions(600, 0, 0, 0, 0, true);

  /** True when either budget is set. */
  public boolean hasBudget() {
    return maxTotalTokens > 0 || maxDocs > 0;
  }
}
