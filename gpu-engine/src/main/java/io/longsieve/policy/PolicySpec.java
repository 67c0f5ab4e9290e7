package io.longsieve.policy;

import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicyCatalog.Backend;
import io.longsieve.policy.PolicyCatalog.Param;
import io.longsieve.policy.PolicyCatalog.Slot;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * A request's attention policy: one policy per slot (prefill × KV compression × decode), validated
 * before any work starts so a misspelt policy fails at submit time, not on an executor hours later.
 *
 * <h2>Grammar</h2>
 * <pre>
 *   spec  := term ( '+' term )*
 *   term  := [ slot '=' ] name [ ':' key '=' value ( ',' key '=' value )* ]
 *   slot  := prefill | kv | decode
 * </pre>
 * Names and their slots: prefill {@code dense, tokenselect, tsa, oracle}; kv {@code none, selkv, snapkv,
 * h2o, streaming}; decode {@code dense, tokenselect, quest, streaming, oracle}. Parameters and defaults are
 * in {@link PolicyCatalog}. Names, keys and values are case-insensitive.
 * <ul>
 *   <li>A single term without a slot is a shorthand: {@code tokenselect} (and {@code oracle}) fills prefill and decode,
 *       {@code streaming} fills kv and decode, {@code dense} is dense everywhere, any other name
 *       fills its only slot.</li>
 *   <li>Several terms go, in order, each into the earliest slot that accepts its name and comes
 *       after the previous term's slot: {@code tsa + selkv:ratio=0.25 + tokenselect:k=2048} is
 *       prefill tsa, kv selkv, decode tokenselect; {@code tokenselect + tokenselect:k=512} is
 *       prefill then decode. A {@code slot=} prefix places a term explicitly.</li>
 *   <li>Slots left empty are {@code dense} / {@code none} / {@code dense}.</li>
 * </ul>
 * {@link #canonical()} is {@code dense} when every slot is neutral, else the three terms in slot
 * order with every parameter, e.g. {@code tsa:tau=0.005,... + none + tokenselect:sinks=128,...};
 * it parses back to the same spec. {@link #resolved} is the canonical form with what the model
 * folder decided filled in ({@code layers=auto(2-3)}); rows carry both.
 *
 * <p>A spec is parsed once, where the text comes in (the job's options, the CLI), and travels
 * typed from there: engine spec, request, runner, backend factory.
 */
public record PolicySpec(PolicyTerm prefill, PolicyTerm kv, PolicyTerm decode) implements Serializable {

  /** Dense prefill, no compression, dense decode: the engine's default. */
  public static final PolicySpec DENSE = parse("dense");

  public static PolicySpec parse(String text) {
    String t = text == null || text.isBlank() ? "dense" : text.trim().toLowerCase(Locale.ROOT);
    String[] parts = t.split("\\+", -1);
    PolicyTerm[] slots = new PolicyTerm[3];
    if (parts.length == 1 && !hasSlotLabel(parts[0])) {
      PolicyTerm term = PolicyTerm.parse(parts[0]);
      if (term.name().equals("tokenselect") || term.name().equals("oracle")) {
        slots[0] = term;
        slots[2] = term;
      } else if (term.name().equals("streaming")) {
        slots[1] = term;
        slots[2] = term;
      } else if (!term.name().equals("dense")) {
        slots[PolicyCatalog.get(term.name()).slots().iterator().next().ordinal()] = term;
      }
    } else {
      int next = 0;
      for (String part : parts) {
        if (part.isBlank()) throw new IllegalArgumentException("empty term in policy '" + text + "'");
        Slot slot = null;
        String body = part.trim();
        if (hasSlotLabel(body)) {
          int eq = body.indexOf('=');
          slot = slotNamed(body.substring(0, eq).trim(), text);
          body = body.substring(eq + 1);
        }
        PolicyTerm term = PolicyTerm.parse(body);
        var accepts = PolicyCatalog.get(term.name()).slots();
        if (slot == null) {
          for (Slot s : Slot.values()) {
            if (s.ordinal() >= next && accepts.contains(s) && slots[s.ordinal()] == null) {
              slot = s;
              break;
            }
          }
          if (slot == null) {
            throw new IllegalArgumentException("policy '" + text + "': no slot left for '" + term.name()
                + "' (it fits " + labels(accepts) + "; terms go in the order prefill + kv + decode)");
          }
        } else if (!accepts.contains(slot)) {
          throw new IllegalArgumentException("policy '" + term.name() + "' cannot be the " + slot.label
              + " policy; " + slot.label + " policies: " + String.join(", ", PolicyCatalog.namesFor(slot)));
        }
        if (slots[slot.ordinal()] != null) {
          throw new IllegalArgumentException("policy '" + text + "' gives the " + slot.label + " slot twice");
        }
        slots[slot.ordinal()] = term;
        next = slot.ordinal() + 1;
      }
    }
    for (Slot s : Slot.values()) if (slots[s.ordinal()] == null) slots[s.ordinal()] = PolicyTerm.parse(s.neutral);
    return new PolicySpec(slots[0], slots[1], slots[2]);
  }

  private static boolean hasSlotLabel(String term) {
    int eq = term.indexOf('='), colon = term.indexOf(':');
    return eq > 0 && (colon < 0 || eq < colon);
  }

  private static Slot slotNamed(String label, String text) {
    for (Slot s : Slot.values()) if (s.label.equals(label)) return s;
    throw new IllegalArgumentException("policy '" + text + "': unknown slot '" + label + "'; slots: prefill, kv, decode");
  }

  private static String labels(java.util.Set<Slot> slots) {
    List<String> l = new ArrayList<>();
    for (Slot s : slots) l.add(s.label);
    return String.join("/", l);
  }

  /**
   * The policy a run asks for, from the CLI's {@code --policy} (a whole spec) and its per-slot
   * {@code --prefill}, {@code --kv} and {@code --decode} options (null where not given), which
   * replace that slot of {@code --policy}: {@code --policy tokenselect --kv selkv} is TokenSelect
   * prefill and decode over a SelKV-compressed cache.
   */
  public static PolicySpec compose(String policy, String prefill, String kv, String decode) {
    PolicySpec base = parse(policy);
    PolicyTerm p = prefill == null ? base.prefill : slotTerm(Slot.PREFILL, prefill);
    PolicyTerm k = kv == null ? base.kv : slotTerm(Slot.KV, kv);
    PolicyTerm d = decode == null ? base.decode : slotTerm(Slot.DECODE, decode);
    return new PolicySpec(p, k, d);
  }

  private static PolicyTerm slotTerm(Slot slot, String text) {
    if (text.isBlank()) return PolicyTerm.parse(slot.neutral);
    if (text.contains("+")) throw new IllegalArgumentException("--" + slot.label + " takes one policy, not '" + text + "'");
    PolicyTerm t = PolicyTerm.parse(text);
    if (!PolicyCatalog.get(t.name()).slots().contains(slot)) {
      throw new IllegalArgumentException("'" + t.name() + "' is not a " + slot.label + " policy; " + slot.label
          + " policies: " + String.join(", ", PolicyCatalog.namesFor(slot)));
    }
    return t;
  }

  /**
   * Checks this policy against the model it will run on, so that a run fails before Spark starts,
   * in one line, instead of on every row: an explicit {@code tsa:layers} list must name layers the
   * model has ({@code tsa:layers=99} on a 6-layer model is refused, naming layer 99 and numLayers
   * 6), and {@code quest:dense_layers} must not exceed the model's layers. Each parameter's own range
   * was already checked by {@link #parse}; {@code layers=auto} is resolved from the model folder
   * when the policy is created.
   *
   * @param model the checkpoint's config.json
   * @throws IllegalArgumentException with a one-line message naming the policy, the parameter and
   *     the model's size
   */
  public void checkAgainst(ModelConfig model) {
    prefill.checkAgainst(model);
    kv.checkAgainst(model);
    decode.checkAgainst(model);
  }

  /** True when every slot is neutral (dense prefill, no compression, dense decode). */
  public boolean isDense() {
    return prefill.name().equals("dense") && kv.name().equals("none") && decode.name().equals("dense");
  }

  /** Normalised text with every parameter; parses back to this spec. */
  public String canonical() {
    if (isDense()) return "dense";
    return prefill.canonical() + " + " + kv.canonical() + " + " + decode.canonical();
  }

  /**
   * The canonical form with TSA's sparse layers as the backend resolved them, e.g.
   * {@code tsa:...,layers=auto(2-3),...} (or {@code layers=auto-unprofiled(3-5)} when the model folder has no
   * profile); the canonical form itself when the prefill is not TSA.
   *
   * @param tsaLayers what the layers value resolved to ({@link LayerList#describe}); ignored unless the prefill is tsa
   */
  public String resolved(String tsaLayers) {
    if (!prefill.name().equals("tsa") || tsaLayers == null) return canonical();
    PolicyTerm p = prefill.withText("layers", tsaLayers);
    return p.canonical() + " + " + kv.canonical() + " + " + decode.canonical();
  }

  /**
   * The prefill chunk this policy fixes, or -1 where the engine chooses. TSA selects once per
   * prefill chunk, so its {@code chunk} parameter is part of the algorithm: both backends prefill a
   * TSA request in chunks of exactly that many tokens (the last one shorter), whatever their own
   * chunk setting; 0 means the whole prompt in one chunk.
   */
  public int prefillChunk() {
    return prefill.name().equals("tsa") ? prefill.intParam("chunk") : -1;
  }

  /**
   * True when prefill and decode are TokenSelect with the same parameters: the backends then use
   * one object for both, so the Selection Cache spans the request.
   */
  public boolean sharesTokenSelect() {
    return prefill.name().equals("tokenselect") && prefill.equals(decode);
  }

  /**
   * Null when {@code backend} runs every slot of this policy with these parameters, else why not,
   * e.g. {@code "KV policy 'h2o'"} or {@code "selkv gate=0.5 (a CPU-only diagnostic)"}. Read from
   * {@link PolicyCatalog}'s backends column, the one table of what runs where.
   */
  public String unsupportedReason(Backend backend) {
    for (Slot s : Slot.values()) {
      PolicyTerm t = term(s);
      PolicyCatalog.Entry e = PolicyCatalog.get(t.name());
      if (!e.backends().contains(backend)) {
        return (s == Slot.KV ? "KV" : s.label) + " policy '" + t.name() + "'";
      }
      for (Param p : e.params()) {
        if (p.anyValueOn() != null && !p.anyValueOn().contains(backend)
            && !t.text(p.key()).equals(PolicyTerm.normalised(t.name(), p, p.dflt()))) {
          return t.name() + " " + p.key() + "=" + t.text(p.key()) + " (a " + onlyText(p.anyValueOn()) + " diagnostic)";
        }
      }
    }
    return null;
  }

  private static String onlyText(java.util.Set<Backend> backends) {
    List<String> l = new ArrayList<>();
    for (Backend b : backends) l.add(b.name());
    return String.join("/", l) + "-only";
  }

  /** The term in {@code slot}. */
  public PolicyTerm term(Slot slot) {
    return switch (slot) {
      case PREFILL -> prefill;
      case KV -> kv;
      case DECODE -> decode;
    };
  }

  @Override
  public String toString() {
    return canonical();
  }
}
