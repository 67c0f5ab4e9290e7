package io.longsieve.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.cuda.policy.GpuPolicy;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicySpec;
import org.junit.jupiter.api.Test;

/** How many long sequences BatchBench.policies decodes together: its memory plan, run without a GPU. */
class BatchBenchPlanTest {

  static final ModelConfig LLAMA_8B = Bench.llama3_8b();
  static final long GIB = 1L << 30;
  // an H200's budget (0.95 of about 148 GB free) less the 8B model's 16 GB of bf16 weights
  static final long FREE_AFTER_WEIGHTS = 124_000_000_000L;

  @Test
  void anH200HoldsFour128KSequencesAndEightAt64K() {
    assertEquals(4, BatchBench.maxSequences(LLAMA_8B, 131072 + 12, FREE_AFTER_WEIGHTS, 2 * GIB));
    assertEquals(8, BatchBench.maxSequences(LLAMA_8B, 65536 + 12, FREE_AFTER_WEIGHTS, 2 * GIB));
    assertEquals(8, BatchBench.maxSequences(LLAMA_8B, 32768 + 12, FREE_AFTER_WEIGHTS, 2 * GIB), "the batch limit");
  }

  @Test
  void aSequenceIsItsCacheAndTheInt4Copy() {
    long cache = PagedKvCache.bytesFor(LLAMA_8B, 131072);
    long all = BatchBench.sequenceBytes(LLAMA_8B, 131072);
    // three bf16 copies of 128 B-wide heads (pre-RoPE keys, rotated keys, values) against int4 keys and an f32 scale,
    // at 5/4 × 9/8 of the slots: 68 / 768 × 1.40625 ≈ 12.5 % more
    assertEquals(25.8e9, cache, 0.1e9);
    assertEquals(0.125, (all - cache) / (double) cache, 0.002);
  }

  @Test
  void noRoomNoSequences() {
    assertEquals(0, BatchBench.maxSequences(LLAMA_8B, 131072, GIB, 2 * GIB));
    assertEquals(1, BatchBench.maxSequences(LLAMA_8B, 131072, BatchBench.sequenceBytes(LLAMA_8B, 131072) + 2 * GIB, 2 * GIB));
  }

  @Test
  void everyBenchedPolicyRunsOnTheGpu() {
    for (String p : BatchBench.POLICIES) assertNull(GpuPolicy.unsupportedReason(PolicySpec.parse(p)), p);
    assertEquals(-1.0, PolicySpec.parse("decode=tokenselect:threshold=-1").decode().doubleParam("threshold"));
  }
}
