package io.longsieve.job;

import java.io.Serializable;

/**
 * The options that make a run schedulable every night on a cluster, part of {@link RunOptions}
 * (keys spark.longsieve.*, listed with {@code longsieve run --help}).
 *
 * @param resume                  skip doc_ids an earlier run under the same output finished with status ok
 * @param resumeAnyway            resume even when an earlier run made its answers with other options ({@link ResumeCheck})
 * @param docTimeoutSeconds       per-document time limit; 0 = none
 * @param progressIntervalSeconds seconds between the driver's progress lines; 0 = none
 * @param inferenceGpuAmount      GPU share per generation task through a stage-level TaskResourceProfile;
 *                                0 = no profile (spark.task.resource.gpu.amount applies to every stage)
 * @param charsPerToken           characters per token in the driver's cost estimate
 * @param slices                  commit slices of the generation stage; 0 = one per wave of task slots
 * @param maxBatch                documents an executor's engine decodes together (continuous batching)
 * @param gpuMemoryFraction       share of the GPU memory free at engine open that the engine may take;
 *                                a document whose KV cache does not fit in it becomes an {@code oom} row
 * @param prefixReuse             rows whose prompts share a long prefix (one document, several questions) go to one
 *                                partition, and its engine computes the prefix's KV cache once and starts the other
 *                                rows from it (docs/prefix-reuse.md); false: every row prefills its whole prompt
 * @param prefixCacheMb           MiB the kept prefixes of one engine may hold together (least recently used dropped
 *                                first); 0 = a quarter of the engine's KV memory
 * @param injectOomDocId          testing only: this doc_id fails as if out of GPU memory; null = off
 * @param injectStickyCudaError   testing only: "DOC_ID@MARKER_FILE": the first attempt of DOC_ID (while
 *                                MARKER_FILE does not exist; it is created) fails with a sticky CUDA error
 */
public record ProductionOptions(
    boolean resume,
    boolean resumeAnyway,
    int docTimeoutSeconds,
    int progressIntervalSeconds,
    double inferenceGpuAmount,
    double charsPerToken,
    int slices,
    int maxBatch,
    double gpuMemoryFraction,
    boolean prefixReuse,
    int prefixCacheMb,
    String injectOomDocId,
    String injectStickyCudaError) implements Serializable {

  public static final ProductionOptions DEFAULTS = new ProductionOptions(false, false, 0, 30, 0, 4.0, 0, 8, 0.9, true, 0,
      null, null);

  /** What the engine spec's prefix cache is: 0 (reuse off), the engine's default, or the MiB asked for. */
  public long prefixCacheBytes() {
    if (!prefixReuse) return 0;
    return prefixCacheMb > 0 ? (long) prefixCacheMb << 20 : io.longsieve.engine.spi.EngineSpec.PREFIX_CACHE_DEFAULT;
  }
}
