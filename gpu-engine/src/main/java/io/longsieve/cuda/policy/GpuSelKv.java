package io.longsieve.cuda.policy;

import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kernels.KvCompressKernels;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicyTerm;
import io.longsieve.policy.SelectionStats;
import jcuda.driver.CUdeviceptr;

/**
 * SelKV on the GPU: what cpu/policy/SelKv and SelKvMerge compute, per layer on the device.
 * Observation attention of the last {@code window} prompt queries; scores a·‖v‖₁ (optionally
 * avg-pooled); per-head proposals and their GQA union ranked by the summed score (ties to the lower
 * slot, as TopK); keep lists sinks ++ picks ++ window; then every dropped token is routed to the most
 * attended pick of its position bucket (the nearest pick when the bucket has none), merged with the
 * value-cosine gate max(cos(v_i, v_t), 0) into the attention-weighted average (keys too with merge=kv,
 * re-rotated at the kept slot's position), and each query head's bias of the kept slot gets
 * α·log R_{h,t} from the gated mass; then each KV head's kept slots move to slots 0..budget−1.
 * Records no statistics of its own (the CPU twin records none; GpuPolicy sets kvBytesAfter).
 * Failure semantics: CUDA errors propagate from the call that queued the work; compress
 * synchronises once per layer (it reads the list sizes back).
 */
public final class GpuSelKv extends GpuObservedKv {

  private final double ratio, alpha;
  private final int sinks, pool, bucket;
  private final String merge;
  private final int heads, d;

  public GpuSelKv(PolicyTerm t, SelectionStats stats, GpuEnv env) {
    super(Math.max(1, t.intParam("window")), env);  // gate > 0 (CPU-only) is refused by GpuPolicy.unsupportedReason
    ModelConfig c = env.config();
    ratio = t.doubleParam("ratio");
    alpha = t.doubleParam("alpha");
    sinks = t.intParam("sinks");
    pool = Math.max(1, t.intParam("pool"));
    bucket = t.intParam("bucket");
    merge = t.text("merge");
    heads = c.numHeads();
    d = c.headDim();
  }

  /** Kept slots per KV head for a layer of n slots with win observed rows: n when nothing is dropped. */
  public static int budget(double ratio, int sinks, int win, int n) {
    return (int) Math.max((long) sinks + win, Math.round(ratio * n));
  }

  @Override
  protected void compressLayer(int layer, PagedKvCache kv, GpuKvCompress.Scratch s, DeviceBuffer counts) {
    int n = kv.length(layer);
    int win = observed(layer);
    int budget = budget(ratio, sinks, win, n);
    if (budget >= n) return;
    boolean merging = !merge.equals("off");
    if (merging) kv.ensureBias();  // zeros: the observation attention below is unchanged by it
    Kernels.KvView view = kv.layer(layer);
    CUdeviceptr attn = obs.attention(layer, view, n, env, kk, s);  // (heads, n), slots 0..3
    int mid = n - sinks - win, pick = budget - sinks - win, drop = n - budget;
    CUdeviceptr vnorm = s.get(4, (long) nKv * n * 4);           // (nKv, n)
    CUdeviceptr raw = s.get(5, (long) heads * mid * 4);          // (heads, mid) a · |v|_1
    CUdeviceptr score = pool > 1 ? s.get(6, (long) heads * mid * 4) : raw;  // (heads, mid) pooled
    CUdeviceptr sum = s.get(7, (long) nKv * mid * 4);            // (nKv, mid) Σ_h score, −∞ outside the union
    CUdeviceptr flagsH = s.get(8, (long) heads * mid);           // (heads, mid) u8 proposals
    CUdeviceptr flagsG = s.get(9, (long) nKv * mid);             // (nKv, mid) u8 picks
    CUdeviceptr keep = s.get(10, (long) nKv * budget * 4);       // (nKv, budget) int
    CUdeviceptr dropList = merging ? s.get(11, (long) nKv * Math.max(1, drop) * 4) : null; // (nKv, drop) int
    kk.vnorm(vnorm, view, n);
    kk.mulSlice(raw, attn, vnorm, n, sinks, mid, heads, group);
    if (pool > 1) kk.avgPool(score, raw, heads, mid, pool);
    kk.groupSum(sum, score, mid, mid, nKv, group);
    kk.topkFlags(flagsH, mid, score, mid, heads, mid, pick);
    kk.unionMask(sum, flagsH, mid, nKv, group);
    kk.topkFlags(flagsG, mid, sum, mid, nKv, mid, pick);
    kk.lists(keep, budget, dropList, Math.max(1, drop), counts.ptr(), flagsG, mid, nKv, n, sinks, n - win);
    checkCounts(counts, budget, drop);
    if (merging) merge(layer, view, attn, keep, budget, pick, dropList, drop, n, s);
    retain(kv, layer, keep, budget, s);
  }

  /**
   * Stages 3-5 (cpu/policy/SelKvMerge): routing of every dropped slot to a pick keep[g, sinks ..
   * sinks + pick), the gated, attention-weighted merge and the bias per query head.
   */
  private void merge(int layer, Kernels.KvView view, CUdeviceptr attn, CUdeviceptr keep, int budget, int pick,
                     CUdeviceptr dropList, int drop, int n, GpuKvCompress.Scratch s) {
    int posOffset = obs.posOffset(layer), from = sinks, to = sinks + pick;
    CUdeviceptr mass = s.get(12, (long) nKv * n * 4);                   // (nKv, n) Σ over the group's heads of attn
    CUdeviceptr runBest = s.get(13, (long) nKv * budget * 4);           // (nKv, budget) int
    CUdeviceptr target = s.get(14, (long) nKv * drop * 4);              // (nKv, drop) int index into keep, or -1
    CUdeviceptr weight = s.get(15, (long) nKv * budget * 4);            // (nKv, budget) Σ g_i A_i
    CUdeviceptr vAcc = s.get(16, (long) nKv * budget * d * 4);          // (nKv, budget, d) Σ g_i A_i v_i
    CUdeviceptr kAcc = merge.equals("kv") ? s.get(17, (long) nKv * budget * d * 4) : null; // Σ g_i A_i k_i
    CUdeviceptr headMass = s.get(18, (long) nKv * budget * group * 4);  // (nKv, budget, group) Σ g_i a_hi
    kk.groupSum(mass, attn, n, n, nKv, group);
    kk.bucketBest(runBest, keep, budget, from, to, mass, n, posOffset, bucket, nKv);
    kk.route(target, dropList, drop, keep, budget, from, to, runBest, posOffset, bucket, nKv);
    env.k().fillF32(weight, (long) nKv * budget, 0f);
    env.k().fillF32(vAcc, (long) nKv * budget * d, 0f);
    if (kAcc != null) env.k().fillF32(kAcc, (long) nKv * budget * d, 0f);
    env.k().fillF32(headMass, (long) nKv * budget * group, 0f);
    kk.mergeAcc(weight, vAcc, kAcc, headMass, target, dropList, drop, keep, budget, attn, mass, view, n, group);
    kk.mergeApply(view, weight, vAcc, kAcc, headMass, keep, budget, from, to, attn, mass, env.invFreq(), posOffset, n,
        group, alpha);
  }
}
