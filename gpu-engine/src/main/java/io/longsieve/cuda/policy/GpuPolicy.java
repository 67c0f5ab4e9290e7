package io.longsieve.cuda.policy;

import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.policy.LayerList;
import io.longsieve.policy.PolicyCatalog.Backend;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyStats;
import io.longsieve.policy.SelectionProbe;
import io.longsieve.policy.SelectionStats;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import jcuda.driver.CUdeviceptr;

/**
 * A request's attention policy on the GPU: one part per slot of its {@link PolicySpec}, the same
 * composition as cpu/policy/ComposedPolicy on the CPU and the same statistics, so a run can be
 * moved between backends and compared. On sliding-window layers every policy attends densely within
 * the window and KV compression leaves the layer whole, as on the CPU. Prefill chunks go to the prefill part (and are shown to the
 * KV part first), the KV part rewrites the cache once after the prompt, decode steps go to the
 * decode part. This is the CUDA backend's one policy factory; which names it runs comes from
 * {@link io.longsieve.policy.PolicyCatalog}'s backends column.
 *
 * <p>Failure semantics: {@link #open} refuses a policy the GPU does not run ({@link #supported}
 * says which) with IllegalArgumentException before any device memory is taken; CUDA errors
 * propagate from the call that queued the work. Not thread-safe: one sequence.
 */
public final class GpuPolicy implements AutoCloseable {

  private final SelectionStats stats;
  private final GpuParts.Prefill prefill;
  private final GpuParts.Kv kvPart;   // null: no compression
  private final GpuParts.Decode decode;
  private final GpuDense.Prefill windowed;       // sliding-window layers: dense within the window
  private final GpuDense.Decode windowedDecode;
  private final io.longsieve.model.ModelConfig config;
  private final List<GpuParts.Part> parts = new ArrayList<>();
  private final String described;
  private final GpuEnv env;
  private final long id = IDS.incrementAndGet();
  private static final AtomicLong IDS = new AtomicLong();

  /** Null when the GPU runs every slot of the policy, else why not (e.g. H2O's per-step eviction). */
  public static String unsupportedReason(PolicySpec spec) {
    return spec.unsupportedReason(Backend.CUDA);
  }

  public static boolean supported(PolicySpec spec) {
    return unsupportedReason(spec) == null;
  }

  public static GpuPolicy open(PolicySpec spec, GpuEnv env) {
    String why = unsupportedReason(spec);
    if (why != null) throw new IllegalArgumentException("the CUDA backend does not run " + why + " (of '" + spec + "')");
    return new GpuPolicy(spec, env);
  }

  private GpuPolicy(PolicySpec spec, GpuEnv env) {
    this.env = env;
    stats = new SelectionStats(env.config().numLayers());
    config = env.config();
    windowed = new GpuDense.Prefill(stats, env);
    windowedDecode = new GpuDense.Decode(stats, env);
    String desc = spec.canonical();
    try {
      GpuTokenSelect tsPrefill = null;
      switch (spec.prefill().name()) {
        case "dense" -> prefill = add(new GpuDense.Prefill(stats, env));
        case "tokenselect" -> prefill = tsPrefill = add(new GpuTokenSelect(spec.prefill(), stats, env));
        case "tsa" -> {
          GpuTsa t = add(new GpuTsa(spec.prefill(), stats, env));
          prefill = t;
          desc = spec.resolved(LayerList.describe(spec.prefill().text("layers"), t.layerList(), env.modelDir()));
        }
        default -> throw new IllegalStateException("not a prefill policy: " + spec.prefill().name());
      }
      kvPart = switch (spec.kv().name()) {
        case "none" -> null;
        case "selkv" -> add(new GpuSelKv(spec.kv(), stats, env));
        case "snapkv" -> add(new GpuSnapKv(spec.kv(), stats, env));
        case "streaming" -> add(new GpuStreamingEviction(spec.kv(), stats, env));
        default -> throw new IllegalStateException("not a kv policy: " + spec.kv().name());
      };
      decode = switch (spec.decode().name()) {
        case "dense" -> add(new GpuDense.Decode(stats, env));
        case "tokenselect" -> spec.sharesTokenSelect() ? tsPrefill : add(new GpuTokenSelect(spec.decode(), stats, env));
        case "quest" -> add(new GpuQuest(spec.decode(), stats, env));
        case "streaming" -> add(new GpuStreaming.Window(spec.decode(), stats, env));
        default -> throw new IllegalStateException("not a decode policy: " + spec.decode().name());
      };
    } catch (RuntimeException | Error e) {
      close();
      throw e;
    }
    described = desc;
  }

  private <T extends GpuParts.Part> T add(T part) {
    parts.add(part);
    return part;
  }

  /** Unique among the policies of this JVM: what a captured step's key names a policy row by. */
  public long id() {
    return id;
  }

  public String describe() {
    return described;
  }

  public void prefill(LayerCall c) {
    if (sliding(c.layer())) {  // dense within the window, whatever the policy (cpu/policy/ComposedPolicy's rule)
      windowed.prefill(c);
      return;
    }
    if (kvPart != null) kvPart.observe(c);
    prefill.prefill(c);
  }

  private boolean sliding(int layer) {
    return config.window(layer) > 0;
  }

  /**
   * The state a kept prompt prefix carries to its forks (prefix reuse): the prefill part's (TokenSelect's
   * Selection Cache); null when it has none. Statistics are not kept: a fork counts its own work.
   */
  public GpuParts.KeptState keepPrefixState() {
    return prefill.keepState();
  }

  /** Starts this (fresh) policy from a kept prefix's state, kept under the same prefill policy. */
  public void adoptPrefixState(GpuParts.KeptState state) {
    if (state != null) prefill.adoptState(state);
  }

  /**
   * Once after the whole prompt is cached, before the first decode step. KV compression rewrites the
   * cache in place, so pages shared with a kept prefix or a fork are copied first.
   */
  public void afterPrefill(PagedKvCache kv) {
    if (kvPart == null) return;
    kv.unshare(env.k().stream());
    kvPart.compress(kv);
    stats.kvBytesAfter = kv.bf16Bytes();
    decode.reset();
  }

  /**
   * Whether this policy's decode steps are dense attention over the whole cache with nothing
   * rewriting it after a step: then the model can run them as one batched step outside
   * {@link #decode} (a CUDA graph), and {@link #countDenseDecode} keeps the statistics.
   */
  public boolean decodesDense() {
    return decode instanceof GpuDense.Decode && kvPart == null;
  }

  /** Counts one dense decode step of every layer, run outside {@link #decode}: before slots cached, at position pos0. */
  public void countDenseDecode(int before, int pos0) {
    GpuDense.Decode dense = (GpuDense.Decode) decode;
    for (int l = 0; l < stats.layers(); l++) dense.count(l, before, pos0);
  }

  /**
   * Whether this policy's decode steps can run inside a captured step ({@link #planStep},
   * {@link #launchStep}): a decode part that splits its decisions from its launches
   * (TokenSelect), and nothing rewriting the cache after a step. Not while a SelectionProbe listens:
   * its reports read the selections back after each eager launch.
   */
  public boolean capturesDecode() {
    return decode instanceof GpuParts.CapturedDecode && kvPart == null && !SelectionProbe.active();
  }

  /** The host half of a captured step; see {@link GpuParts.CapturedDecode#planStep}. Requires {@link #capturesDecode}. */
  public long planStep(PagedKvCache kv, int end, int pos, int[] sizes, int at) {
    return ((GpuParts.CapturedDecode) decode).planStep(kv, end, pos, sizes, at);
  }

  /** One layer's launches of the planned step; see {@link GpuParts.CapturedDecode#launchStep}. */
  public void launchStep(LayerCall c, CUdeviceptr step) {
    ((GpuParts.CapturedDecode) decode).launchStep(c, step);
  }

  /** Whether the planned step attends densely in the layer; see {@link GpuParts.CapturedDecode#stepAttendsDense}. */
  public boolean stepAttendsDense(int layer) {
    return sliding(layer) || ((GpuParts.CapturedDecode) decode).stepAttendsDense(layer);
  }

  public void decode(LayerCall c, PagedKvCache kv) {
    if (sliding(c.layer())) {
      windowedDecode.decode(c);
      return;
    }
    decode.decode(c);
    if (kvPart != null && kvPart.afterDecode(c, kv)) decode.reset();
  }

  /** Statistics so far; folds device-side counters in (synchronises the stream). */
  public PolicyStats stats() {
    for (GpuParts.Part p : parts) p.collect();
    return stats.snapshot();
  }

  @Override
  public void close() {
    for (GpuParts.Part p : parts) p.close();
    parts.clear();
  }
}
