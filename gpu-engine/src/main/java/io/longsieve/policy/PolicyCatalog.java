package io.longsieve.policy;

import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Every attention policy the engine knows: its name, the slots it may fill (prefill, KV
 * compression, decode) and its parameters with their official defaults and valid ranges. The
 * parser validates against this table and the canonical form lists every parameter in the order
 * given here, so two runs with the same canonical string ran the same algorithm.
 *
 * <p>Ranges follow from what each number means: a budget of tokens to keep or attend ({@code k},
 * {@code budget}, {@code capacity}, {@code recent}) is at least 1, since attending nothing is no
 * algorithm; a count that may be switched off ({@code sinks}, {@code pool}, {@code min}) is at
 * least 0; a share of the cache kept is in (0, 1]; a share dropped ({@code tau}) is in [0, 1);
 * a cosine threshold may be any number (above 1 never met, -1 always). Counts stop at {@link ParamRange#MAX_COUNT}. A few rules join
 * two parameters ({@link PolicyTerm#parse}); layer numbers are checked against the model by
 * {@link PolicySpec#checkAgainst}.
 */
public final class PolicyCatalog {
  private PolicyCatalog() {}

  /** The three places a policy plugs into a request. */
  public enum Slot {
    PREFILL("prefill", "dense"), KV("kv", "none"), DECODE("decode", "dense");

    final String label;
    final String neutral; // the name that means "do nothing special" in this slot

    Slot(String label, String neutral) {
      this.label = label;
      this.neutral = neutral;
    }

    /** The slot's name in the grammar and in messages: prefill, kv or decode. */
    public String label() {
      return label;
    }
  }

  /**
   * The backends that run policies. A catalog entry lists those that implement it; each backend's
   * one policy factory (cpu.policy.ComposedPolicy, cuda.policy.GpuPolicy) refuses the others through
   * {@link PolicySpec#unsupportedReason}, so device auto can fall back before any work starts.
   */
  public enum Backend { CPU, CUDA }

  /**
   * One parameter: a default and a rule for its values (a range for numbers, choices for words).
   * {@code anyValueOn} lists the backends that honour a value other than the default (a diagnostic
   * one backend implements); null means every backend of the entry.
   */
  record Param(String key, String dflt, Kind kind, String choices, ParamRange range, Set<Backend> anyValueOn) {
    enum Kind { INT, NUMBER, CHOICE, LAYERS }

    Param(String key, String dflt, Kind kind, String choices, ParamRange range) {
      this(key, dflt, kind, choices, range, null);
    }

    /** Only on {@code backends}: other backends refuse any value but the default. */
    Param onlyOn(Set<Backend> backends) {
      return new Param(key, dflt, kind, choices, range, backends);
    }
  }

  record Entry(String name, Set<Slot> slots, Set<Backend> backends, List<Param> params) {
    Param param(String key) {
      for (Param p : params) if (p.key().equals(key)) return p;
      return null;
    }

    List<String> keys() {
      List<String> k = new ArrayList<>();
      for (Param p : params) k.add(p.key());
      return k;
    }
  }

  private static final Map<String, Entry> ENTRIES = new LinkedHashMap<>();
  private static final Set<Backend> ALL = EnumSet.allOf(Backend.class);
  private static final Set<Backend> CPU_ONLY = EnumSet.of(Backend.CPU);

  static {
    add("dense", EnumSet.of(Slot.PREFILL, Slot.DECODE), ALL);
    add("none", EnumSet.of(Slot.KV), ALL);
    // TokenSelect (pzs19/TokenSelect config/*.yaml and patch()): n_init 128, top_k 2048, n_local 512,
    // 512-token prefill sub-chunks, no 1/sqrt(d) in the vote, compact list-index positions, and the
    // Selection Cache off (QUERY_CACHE = False in the official release, token_retrieval.py:918).
    add("tokenselect", EnumSet.of(Slot.PREFILL, Slot.DECODE), ALL,
        i("sinks", "128", 0),
        i("k", "2048", 1),                              // tokens selected per step: at least one
        n("k_frac", "0.0", ParamRange.closed(0, 1)),   // > 0: top-k = round(k_frac × cached tokens) instead of k
        i("window", "512", 0),                          // 0 still attends the block's own rows
        i("chunk", "512", 1),                           // prefill sub-chunk sharing one selection
        c("heads", "layer", "layer|kvhead"),            // one token set per layer (official) or per KV head
        c("gqa", "div", "div|mod"),                     // query head h votes with KV head h/group, or h%nKv (official quirk)
        i("pool", "0", 0),                              // max-pool kernel over votes; 0 = off
        c("positions", "compact", "compact|original"),  // RoPE by list index (official) or original position
        c("scale", "none", "none|sqrt"),                // vote logits unscaled (official) or / sqrt(d)
        c("cache", "off", "on|off"),                    // Selection Cache (the method's; off as officially released)
        // Selection Cache cosine threshold: above 1 never hits, -1 and below always hit (bench's quirk)
        n("threshold", "0.9", ParamRange.any()),
        c("index", "full", "full|int4"),                // score with the keys, or a symmetric int4 copy (issue 5 §3)
        // Not the paper's algorithm (CPU and GPU): rope scores every candidate with its key rotated at its
        // original position against the mean of the call's queries rotated at their real positions, i.e.
        // the true attention logits (with scale=sqrt exactly the attention softmax), instead of the
        // official position-neutral proxy (query at window, pre-RoPE keys); the Selection Cache still
        // decides on the neutral fingerprint. Same cost as neutral on the GPU (reads kRope instead of
        // the pre-RoPE keys). Not with index=int4.
        c("score", "neutral", "neutral|rope"));
    // Token Sparse Attention (dongwonjo/Token-Sparse-Attention main.py): coverage 0.005, min_tokens 1024,
    // window 128, avg-pool 7; sparse layers from the drift profile.
    add("tsa", EnumSet.of(Slot.PREFILL), ALL,
        n("tau", "0.005", ParamRange.openAbove(0, 1)),  // attention mass dropped; 0 = dense, 1 would drop all
        i("min", "1024", 0),
        i("window", "128", 1),                          // proxy queries: at least one
        i("pool", "7", 0),                              // 0 and 1: no pooling
        new Param("layers", "auto", Param.Kind.LAYERS, "auto|all|none|<a-b/c/...>", null),
        // BENCHMARK KNOB: > 0 keeps ceil(keep x prefix) (>= min) per sparse layer instead of tau's cut-off
        n("keep", "0.0", ParamRange.closed(0, 1)),
        // selection scope: one selection per this many prompt tokens, both backends prefilling a TSA request
        // in chunks of exactly this size (PolicySpec.prefillChunk); 0 = the whole prompt in one selection, as
        // the official code runs it (bounded by each backend's activation limit). 4096 covers the bundled
        // model's 1x and 2x prompts whole (2048 / 4096 tokens with the answer budget) and keeps the GPU's
        // 128K prefill in 4096-token chunks, as its figures were measured.
        i("chunk", "4096", 0));
    // SelKV (method write-up, seed 004; research/algorithms.md §3.2; no public code): keep 25 % by
    // attention × |v|₁ plus a recent window; route each dropped token to the most attended kept token of
    // its position bucket, merge it there with the value-cosine gate max(cos(v_i, v_t), 0) into an
    // attention-weighted average, and bias the kept token's logit by α·log R per query head.
    add("selkv", EnumSet.of(Slot.KV), ALL,
        n("ratio", "0.25", ParamRange.openBelow(0, 1)), // share kept: 0 would keep nothing
        i("sinks", "4", 0),
        i("window", "32", 1),                           // observation queries, also always kept
        n("alpha", "1.0", ParamRange.atLeast(0)),       // logit bias α·log(R) of merged slots; 0 = none
        c("merge", "values", "values|kv|off"),          // kv: keys averaged the same way too (not the seed's)
        i("pool", "1", 1),                              // > 1: avg-pool the score first (SnapKV-style); 1: the seed
        // routing buckets of this many positions (the seed leaves the size open): a dropped token merges
        // into the most attended kept token of its bucket, the nearest kept one when the bucket has none.
        // 32 ≈ a sentence, so merges stay local, and at the seed's 25 % a bucket holds ~8 kept tokens;
        // 1 = always the nearest kept token, ≥ the prompt = the single most attended one
        i("bucket", "32", 1),
        // DIAGNOSTIC, CPU only (the CUDA backend refuses it): > 0 merges a routed token only when its
        // value cosine with the target is >= gate (the others are evicted: no value, no mass in the
        // bias); 0 = the seed (no threshold)
        n("gate", "0.0", ParamRange.closed(0, 1)).onlyOn(CPU_ONLY));
    // SnapKV (FasterDecoding/SnapKV init_snapkv defaults): window 32, avg-pool 5, capacity 2048.
    add("snapkv", EnumSet.of(Slot.KV), ALL,
        i("window", "32", 1),
        i("pool", "5", 0),                              // 0 and 1: no pooling
        i("capacity", "2048", 1),
        n("ratio", "0.0", ParamRange.closed(0, 1)));   // > 0: capacity = ratio × prompt instead
    // H2O (FMInference/H2O scripts): 10 % heavy hitters + 10 % recent; heavy + recent > 0. CPU only:
    // its per-step eviction has no GPU part.
    add("h2o", EnumSet.of(Slot.KV), CPU_ONLY,
        n("heavy", "0.1", ParamRange.closed(0, 1)),
        n("recent", "0.1", ParamRange.closed(0, 1)));
    // StreamingLLM (mit-han-lab/streaming-llm run_streaming_llama.py): 4 sinks + 2000 recent, pos_shift.
    add("streaming", EnumSet.of(Slot.KV, Slot.DECODE), ALL,
        i("sinks", "4", 0),
        i("recent", "2000", 1),                         // the window holds at least the newest token
        c("positions", "compact", "compact|original"));
    // Quest (mit-han-lab/Quest): pages of 16, token budget, layers 0-1 dense.
    add("quest", EnumSet.of(Slot.DECODE), ALL,
        i("page", "16", 1),
        i("budget", "2048", 1),
        i("dense_layers", "2", 0));                     // at most the model's layers (PolicySpec.checkAgainst)
    // Oracle selector (docs/fidelity.md), a reference, not a method: each query head attends the top-k of its own
    // true attention logits. CPU only: it scores every key of every query, dense attention's cost and more.
    add("oracle", EnumSet.of(Slot.PREFILL, Slot.DECODE), CPU_ONLY,
        i("k", "2048", 1),                              // keys per query: at least one
        n("frac", "0.0", ParamRange.closed(0, 1)));    // > 0: k = round(frac × visible keys) instead, at least 1
  }

  private static Param i(String key, String dflt, int min) {
    return new Param(key, dflt, Param.Kind.INT, null, ParamRange.count(min));
  }

  private static Param n(String key, String dflt, ParamRange range) {
    return new Param(key, dflt, Param.Kind.NUMBER, null, range);
  }

  private static Param c(String key, String dflt, String choices) {
    return new Param(key, dflt, Param.Kind.CHOICE, choices, null);
  }

  private static void add(String name, Set<Slot> slots, Set<Backend> backends, Param... params) {
    ENTRIES.put(name, new Entry(name, slots, backends, List.of(params)));
  }

  static Entry get(String name) {
    Entry e = ENTRIES.get(name);
    if (e == null) throw new IllegalArgumentException("unknown attention policy '" + name + "'; known: " + names());
    return e;
  }

  /** The names the catalog knows, in its order. */
  public static List<String> all() {
    return List.copyOf(ENTRIES.keySet());
  }

  /** True when {@code backend} implements the policy {@code name} (any parameter values aside). */
  public static boolean runsOn(String name, Backend backend) {
    return get(name).backends().contains(backend);
  }

  static String names() {
    return String.join(", ", ENTRIES.keySet());
  }

  /** The names that may fill {@code slot}, in catalog order. */
  public static List<String> namesFor(Slot slot) {
    List<String> n = new ArrayList<>();
    for (Entry e : ENTRIES.values()) if (e.slots().contains(slot)) n.add(e.name());
    return n;
  }
}
