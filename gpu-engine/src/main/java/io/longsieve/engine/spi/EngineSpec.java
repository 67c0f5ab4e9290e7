package io.longsieve.engine.spi;

import io.longsieve.policy.PolicySpec;
import java.io.Serializable;
import java.nio.file.Path;

/**
 * Everything needed to open an engine, small and serializable so the Spark driver can send it to
 * executors. The engine itself is not serializable: each executor opens its own from this spec.
 *
 * @param modelDir        Hugging Face checkpoint folder (config.json, *.safetensors, tokenizer.json)
 * @param device          "auto" (cuda when a GPU and the driver load, else cpu), "cpu" or "cuda"
 * @param gpuOrdinal      CUDA device ordinal to bind; -1 lets the engine take device 0
 * @param threads         CPU threads for matmul; 0 means all available processors
 * @param prefillChunk    tokens per prefill chunk; bounds activation memory for long prompts
 * @param maxContext      longest prompt + output the engine accepts; 0 means the model's own limit
 * @param memoryFraction  share of free GPU memory (cuMemGetInfo) the engine may take
 * @param defaultPolicy   attention policy used when a request names none; null means dense
 * @param maxBatch        most requests the engine runs at once (prefilling or decoding); decode steps batch them
 *                        (the CUDA backend also picks its decode GEMV from it: one for 1, one for batches)
 * @param kvBudgetBytes   KV cache bytes the admitted requests may reserve together (prompt + maxNewTokens slots
 *                        each); 0 means the backend's default (CPU: half the heap; CUDA: no engine-side bound)
 * @param prefixCacheBytes bytes the KV caches of shared prompt prefixes may hold together, kept for the requests
 *                        that share them (prefix reuse, docs/prefix-reuse.md); 0 turns prefix reuse off,
 *                        {@link #PREFIX_CACHE_DEFAULT} takes the backend's default (a quarter of its KV memory).
 *                        On the CUDA backend any value but 0 also puts every sequence's pages in one shared pool
 */
public record EngineSpec(
    String modelDir,
    String device,
    int gpuOrdinal,
    int threads,
    int prefillChunk,
    int maxContext,
    double memoryFraction,
    PolicySpec defaultPolicy,
    int maxBatch,
    long kvBudgetBytes,
    long prefixCacheBytes) implements Serializable {

  /** {@link #prefixCacheBytes} that takes the backend's default budget. */
  public static final long PREFIX_CACHE_DEFAULT = -1;

  /**
   * Prompt tokens per prefill chunk when the user does not say (the job's prefillChunk, the CLIs'
   * --prefill-chunk). 2048, not less, for the CPU backend: its matrix products read every weight once
   * per chunk, and over 2048 rows they ran 6-10% faster than over 512 (bench/RESULTS.md, issue 35).
   * No policy selects differently for it: TSA selects per its own tsa:chunk, TokenSelect per its
   * 512-token sub-chunk, which divides it; dense prefill gives every token the same bits wherever a
   * chunk starts. The CUDA backend takes at least {@code CudaRunner.MIN_GPU_CHUNK} whatever this is.
   */
  public static final int DEFAULT_PREFILL_CHUNK = 2048;

  /** Requests run at once when a spec does not say. */
  public static final int DEFAULT_MAX_BATCH = 8;

  /** A spec with the default batching limits (see {@link #DEFAULT_MAX_BATCH}, backend KV budget). */
  public EngineSpec(String modelDir, String device, int gpuOrdinal, int threads, int prefillChunk, int maxContext,
                    double memoryFraction, PolicySpec defaultPolicy) {
    this(modelDir, device, gpuOrdinal, threads, prefillChunk, maxContext, memoryFraction, defaultPolicy,
        DEFAULT_MAX_BATCH, 0, 0);
  }

  /** A spec without prefix reuse. */
  public EngineSpec(String modelDir, String device, int gpuOrdinal, int threads, int prefillChunk, int maxContext,
                    double memoryFraction, PolicySpec defaultPolicy, int maxBatch, long kvBudgetBytes) {
    this(modelDir, device, gpuOrdinal, threads, prefillChunk, maxContext, memoryFraction, defaultPolicy, maxBatch,
        kvBudgetBytes, 0);
  }

  public EngineSpec {
    if (modelDir == null || modelDir.isBlank()) throw new IllegalArgumentException("modelDir is required");
    if (!device.equals("auto") && !device.equals("cpu") && !device.equals("cuda")) {
      throw new IllegalArgumentException("device must be auto, cpu or cuda, not '" + device + "'");
    }
    if (threads < 0) throw new IllegalArgumentException("threads must be >= 0");
    if (prefillChunk <= 0) throw new IllegalArgumentException("prefillChunk must be > 0");
    if (maxContext < 0) throw new IllegalArgumentException("maxContext must be >= 0");
    if (!(memoryFraction > 0 && memoryFraction <= 1)) throw new IllegalArgumentException("memoryFraction must be in (0, 1]");
    if (defaultPolicy == null) defaultPolicy = PolicySpec.DENSE;
    if (maxBatch <= 0) throw new IllegalArgumentException("maxBatch must be > 0");
    if (kvBudgetBytes < 0) throw new IllegalArgumentException("kvBudgetBytes must be >= 0");
    if (prefixCacheBytes < PREFIX_CACHE_DEFAULT) {
      throw new IllegalArgumentException("prefixCacheBytes must be >= 0 (or -1: the backend's default)");
    }
  }

  /** A spec with the defaults: auto device, all cores, 512-token prefill chunks, dense attention. */
  public static EngineSpec of(Path modelDir) {
    return new EngineSpec(modelDir.toString(), "auto", -1, 0, 512, 0, 0.9, PolicySpec.DENSE);
  }

  public EngineSpec withDevice(String d) {
    return new EngineSpec(modelDir, d, gpuOrdinal, threads, prefillChunk, maxContext, memoryFraction,
        defaultPolicy, maxBatch, kvBudgetBytes, prefixCacheBytes);
  }

  public EngineSpec withGpuOrdinal(int ordinal) {
    return new EngineSpec(modelDir, device, ordinal, threads, prefillChunk, maxContext, memoryFraction,
        defaultPolicy, maxBatch, kvBudgetBytes, prefixCacheBytes);
  }

  public EngineSpec withThreads(int n) {
    return new EngineSpec(modelDir, device, gpuOrdinal, n, prefillChunk, maxContext, memoryFraction,
        defaultPolicy, maxBatch, kvBudgetBytes, prefixCacheBytes);
  }

  public EngineSpec withPrefillChunk(int n) {
    return new EngineSpec(modelDir, device, gpuOrdinal, threads, n, maxContext, memoryFraction,
        defaultPolicy, maxBatch, kvBudgetBytes, prefixCacheBytes);
  }

  public EngineSpec withMaxContext(int n) {
    return new EngineSpec(modelDir, device, gpuOrdinal, threads, prefillChunk, n, memoryFraction,
        defaultPolicy, maxBatch, kvBudgetBytes, prefixCacheBytes);
  }

  public EngineSpec withDefaultPolicy(PolicySpec p) {
    return new EngineSpec(modelDir, device, gpuOrdinal, threads, prefillChunk, maxContext, memoryFraction,
        p, maxBatch, kvBudgetBytes, prefixCacheBytes);
  }

  public EngineSpec withMaxBatch(int n) {
    return new EngineSpec(modelDir, device, gpuOrdinal, threads, prefillChunk, maxContext, memoryFraction, defaultPolicy,
        n, kvBudgetBytes, prefixCacheBytes);
  }

  public EngineSpec withKvBudgetBytes(long bytes) {
    return new EngineSpec(modelDir, device, gpuOrdinal, threads, prefillChunk, maxContext, memoryFraction, defaultPolicy,
        maxBatch, bytes, prefixCacheBytes);
  }

  public EngineSpec withPrefixCacheBytes(long bytes) {
    return new EngineSpec(modelDir, device, gpuOrdinal, threads, prefillChunk, maxContext, memoryFraction, defaultPolicy,
        maxBatch, kvBudgetBytes, bytes);
  }
}
