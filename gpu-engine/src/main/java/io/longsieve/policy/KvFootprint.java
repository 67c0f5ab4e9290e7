package io.longsieve.policy;

import io.longsieve.model.ModelConfig;

/**
 * KV cache bytes of one sequence on the GPU, from the model's shapes and a KV policy's parameters
 * alone (no device): the arithmetic {@code inspect} prints. The layout is the CUDA backend's
 * (cuda/kv/PagedKvCache): per layer and token slot, the keys before RoPE, the keys after RoPE and
 * the values, each nKv × headDim bf16, in pages of {@link #PAGE} slots; a policy that merges tokens
 * (SelKV) adds an f32 logit bias per slot and KV head over the whole capacity.
 *
 * <p>What a compression keeps is what attention reads afterwards ({@link #keptSlots}); what a
 * sequence holds is its capacity's pages from open to end, since each sequence's pages are its
 * own (PagedKvCache's private pool: shrink gives nothing back), so memory planning uses
 * {@link #heldBytes}. Sliding-window layers are never compressed (cpu/policy/ComposedPolicy).
 */
public final class KvFootprint {
  private KvFootprint() {}

  /** Slots per page of the GPU cache (cuda/kernels/Kernels.PAGE_SIZE). */
  public static final int PAGE = 64;

  /** Bytes one token slot takes over all layers: keys before and after RoPE and values, bf16. */
  public static long slotBytes(ModelConfig c) {
    return 3L * 2 * c.kvDim() * c.numLayers();
  }

  /** The usual K + V bf16 figure (what other engines cache per token), for comparison. */
  public static long keyValueBytes(ModelConfig c) {
    return 2L * 2 * c.kvDim() * c.numLayers();
  }

  /**
   * Slots a compressed layer keeps of a prompt of {@code n} tokens after the KV term's compression,
   * as the compressors size their budgets (SelKv, SnapKv, H2o, StreamingLlm.Eviction); n for none.
   */
  public static long keptSlots(PolicyTerm kv, long n) {
    switch (kv.name()) {
      case "selkv": {
        long window = Math.max(1, kv.intParam("window"));
        return Math.min(n, Math.max(kv.intParam("sinks") + window, Math.round(kv.doubleParam("ratio") * n)));
      }
      case "snapkv": {
        double ratio = kv.doubleParam("ratio");
        long cap = ratio > 0 ? Math.round(ratio * n) : kv.intParam("capacity");
        return Math.min(n, Math.max(cap, kv.intParam("window")));
      }
      case "h2o":
        return Math.min(n, Math.round(kv.doubleParam("heavy") * n) + Math.round(kv.doubleParam("recent") * n));
      case "streaming":
        return Math.min(n, (long) kv.intParam("sinks") + kv.intParam("recent"));
      default:
        return n;
    }
  }

  /** Whether the term keeps a per-slot logit bias (SelKV's merges with alpha > 0). */
  public static boolean keepsBias(PolicyTerm kv) {
    return kv.name().equals("selkv") && kv.doubleParam("alpha") > 0 && !kv.text("merge").equals("off");
  }

  /**
   * Bytes the cache of a prompt of {@code n} tokens holds in use after the term's compression:
   * compressed layers their kept slots, sliding-window layers every slot, plus the bias.
   */
  public static long bytesInUse(ModelConfig c, PolicyTerm kv, long n) {
    long perLayerSlot = slotBytes(c) / c.numLayers();
    long kept = keptSlots(kv, n), total = 0;
    for (int l = 0; l < c.numLayers(); l++) total += (c.window(l) > 0 ? n : kept) * perLayerSlot;
    return total + (keepsBias(kv) ? biasBytes(c, n) : 0);
  }

  /** Bytes a sequence of {@code capacity} slots (prompt + output) holds on the GPU from open to end. */
  public static long heldBytes(ModelConfig c, PolicyTerm kv, long capacity) {
    long pages = (capacity + PAGE - 1) / PAGE;
    return pages * PAGE * slotBytes(c) + pages * 4 + (keepsBias(kv) ? biasBytes(c, pages * PAGE) : 0);
  }

  private static long biasBytes(ModelConfig c, long slots) {
    return slots * c.numLayers() * c.numKvHeads() * 4L;
  }
}
