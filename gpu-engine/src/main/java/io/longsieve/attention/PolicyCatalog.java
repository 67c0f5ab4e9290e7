package io.longsieve.attention;

import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Every attention policy the engine knows: its name, the slots it may fill (prefill, KV
 * compression, decode) and its parameters with their official defaults. The parser validates
 * against this table and the canonical form lists every parameter in the order given here, so two
 * runs with the same canonical string ran the same algorithm.
 */
final class PolicyCatalog {
  private PolicyCatalog() {}

  /** The three places a policy plugs into a request. */
  enum Slot {
    PREFILL("prefill", "dense"), KV("kv", "none"), DECODE("decode", "dense");

    final String label;
    final String neutral; // the name that means "do nothing special" in this slot

    Slot(String label, String neutral) {
      this.label = label;
      this.neutral = neutral;
    }
  }

  /** One parameter: a default and a rule for its values. */
  record Param(String key, String dflt, Kind kind, String choices) {
    enum Kind { INT, FRACTION, DOUBLE, CHOICE, LAYERS }
  }

  record Entry(String name, Set<Slot> slots, List<Param> params) {
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

  static final Map<String, Entry> ENTRIES = new LinkedHashMap<>();

  static {
    add("dense", EnumSet.of(Slot.PREFILL, Slot.DECODE));
    add("none", EnumSet.of(Slot.KV));
    // TokenSelect (pzs19/TokenSelect config/*.yaml and patch()): n_init 128, top_k 2048, n_local 512,
    // 512-token prefill sub-chunks, no 1/sqrt(d) in the vote, compact list-index positions.
    add("tokenselect", EnumSet.of(Slot.PREFILL, Slot.DECODE),
        p("sinks", "128", Param.Kind.INT),
        p("k", "2048", Param.Kind.INT),
        p("k_frac", "0.0", Param.Kind.FRACTION),        // > 0: top-k = round(k_frac × cached tokens) instead of k
        p("window", "512", Param.Kind.INT),
        p("chunk", "512", Param.Kind.INT),              // prefill sub-chunk sharing one selection
        c("heads", "layer", "layer|kvhead"),            // one token set per layer (official) or per KV head
        c("gqa", "div", "div|mod"),                     // query head h votes with KV head h/group, or h%nKv (official quirk)
        p("pool", "0", Param.Kind.INT),                 // max-pool kernel over votes; 0 = off
        c("positions", "compact", "compact|original"),  // RoPE by list index (official) or original position
        c("scale", "none", "none|sqrt"),                // vote logits unscaled (official) or / sqrt(d)
        c("cache", "on", "on|off"),                     // Selection Cache
        p("threshold", "0.9", Param.Kind.DOUBLE),       // Selection Cache cosine threshold
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
    add("tsa", EnumSet.of(Slot.PREFILL),
        p("tau", "0.005", Param.Kind.FRACTION),
        p("min", "1024", Param.Kind.INT),
        p("window", "128", Param.Kind.INT),
        p("pool", "7", Param.Kind.INT),
        new Param("layers", "auto", Param.Kind.LAYERS, "auto|all|none|<a-b/c/...>"),
        p("keep", "0.0", Param.Kind.FRACTION));         // BENCHMARK KNOB: > 0 keeps ceil(keep × prefix) (>= min) per sparse layer instead of tau's cut-off
    // SelKV (reconstructed spec, issue #3 §3): keep 25 % by attention × |v|₁, merge the rest with a cosine gate.
    add("selkv", EnumSet.of(Slot.KV),
        p("ratio", "0.25", Param.Kind.FRACTION),
        p("sinks", "4", Param.Kind.INT),
        p("window", "32", Param.Kind.INT),              // observation queries, also always kept
        p("alpha", "1.0", Param.Kind.DOUBLE),
        c("merge", "values", "values|kv|off"),
        p("pool", "1", Param.Kind.INT),                 // > 1: avg-pool the score first (SnapKV-style); 1: the spec
        // DIAGNOSTIC, CPU only (GpuPolicy refuses it): > 0 merges a dropped token only when its best
        // cosine is >= gate (the others are evicted: no value, no mass in the bias); 0 = the spec
        p("gate", "0.0", Param.Kind.DOUBLE));
    // SnapKV (FasterDecoding/SnapKV init_snapkv defaults): window 32, avg-pool 5, capacity 2048.
    add("snapkv", EnumSet.of(Slot.KV),
        p("window", "32", Param.Kind.INT),
        p("pool", "5", Param.Kind.INT),
        p("capacity", "2048", Param.Kind.INT),
        p("ratio", "0.0", Param.Kind.FRACTION));        // > 0: capacity = ratio × prompt instead
    // H2O (FMInference/H2O scripts): 10 % heavy hitters + 10 % recent.
    add("h2o", EnumSet.of(Slot.KV),
        p("heavy", "0.1", Param.Kind.FRACTION),
        p("recent", "0.1", Param.Kind.FRACTION));
    // StreamingLLM (mit-han-lab/streaming-llm run_streaming_llama.py): 4 sinks + 2000 recent, pos_shift.
    add("streaming", EnumSet.of(Slot.KV, Slot.DECODE),
        p("sinks", "4", Param.Kind.INT),
        p("recent", "2000", Param.Kind.INT),
        c("positions", "compact", "compact|original"));
    // Quest (mit-han-lab/Quest): pages of 16, token budget, layers 0-1 dense.
    add("quest", EnumSet.of(Slot.DECODE),
        p("page", "16", Param.Kind.INT),
        p("budget", "2048", Param.Kind.INT),
        p("dense_layers", "2", Param.Kind.INT));
  }

  private static Param p(String key, String dflt, Param.Kind kind) {
    return new Param(key, dflt, kind, null);
  }

  private static Param c(String key, String dflt, String choices) {
    return new Param(key, dflt, Param.Kind.CHOICE, choices);
  }

  private static void add(String name, Set<Slot> slots, Param... params) {
    ENTRIES.put(name, new Entry(name, slots, List.of(params)));
  }

  static Entry get(String name) {
    Entry e = ENTRIES.get(name);
    if (e == null) throw new IllegalArgumentException("unknown attention policy '" + name + "'; known: " + names());
    return e;
  }

  static String names() {
    return String.join(", ", ENTRIES.keySet());
  }

  static List<String> namesFor(Slot slot) {
    List<String> n = new ArrayList<>();
    for (Entry e : ENTRIES.values()) if (e.slots().contains(slot)) n.add(e.name());
    return n;
  }
}
