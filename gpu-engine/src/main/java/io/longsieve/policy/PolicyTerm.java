package io.longsieve.policy;

import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicyCatalog.Entry;
import io.longsieve.policy.PolicyCatalog.Param;
import java.io.Serializable;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * One validated policy with every parameter filled in (given values normalised, the rest
 * defaults), e.g. {@code tokenselect:sinks=128,k=2048,...}. Immutable.
 */
public record PolicyTerm(String name, Map<String, String> params) implements Serializable {

  public PolicyTerm {
    params = java.util.Collections.unmodifiableMap(new LinkedHashMap<>(params));
  }

  /** Parses {@code name[:key=value,...]} and fills defaults; errors list the known names or keys. */
  static PolicyTerm parse(String text) {
    String t = text.trim().toLowerCase(Locale.ROOT);
    int colon = t.indexOf(':');
    String name = (colon < 0 ? t : t.substring(0, colon)).trim();
    if (name.isEmpty()) throw new IllegalArgumentException("empty policy name in '" + text + "'");
    Entry e = PolicyCatalog.get(name);
    Map<String, String> given = new LinkedHashMap<>();
    if (colon >= 0) {
      String rest = t.substring(colon + 1).trim();
      if (!rest.isEmpty()) {
        for (String kv : rest.split(",")) {
          int eq = kv.indexOf('=');
          if (eq <= 0 || eq == kv.length() - 1) {
            throw new IllegalArgumentException("policy '" + name + "': parameter '" + kv.trim()
                + "' is not key=value" + known(e));
          }
          String key = kv.substring(0, eq).trim(), value = kv.substring(eq + 1).trim();
          Param p = e.param(key);
          if (p == null) throw new IllegalArgumentException("policy '" + name + "' has no parameter '" + key + "'" + known(e));
          if (given.put(key, normalise(name, p, value)) != null) {
            throw new IllegalArgumentException("policy '" + name + "': parameter '" + key + "' given twice");
          }
        }
      }
    }
    Map<String, String> all = new LinkedHashMap<>();
    for (Param p : e.params()) all.put(p.key(), given.getOrDefault(p.key(), normalise(name, p, p.dflt())));
    PolicyTerm term = new PolicyTerm(name, all);
    checkCombination(term);
    return term;
  }

  /** Rules that join two parameters; each parameter alone was checked by {@link #normalise}. */
  private static void checkCombination(PolicyTerm t) {
    switch (t.name()) {
      case "h2o":
        if (t.doubleParam("heavy") + t.doubleParam("recent") <= 0) {
          throw new IllegalArgumentException("policy 'h2o': heavy + recent must be > 0 (heavy=0, recent=0 keeps no tokens)");
        }
        break;
      case "tokenselect":
        TokenSelectParams.of(t); // refuses score=rope with index=int4
        break;
      default:
        break;
    }
  }

  /**
   * What this term means for a model of {@code model}'s size; see {@link PolicySpec#checkAgainst}.
   * Only explicit numbers are checked: {@code layers=auto} reads the model folder when it runs.
   */
  void checkAgainst(ModelConfig model) {
    int layers = model.numLayers();
    if (name.equals("tsa")) {
      List<Integer> listed = LayerList.parse(text("layers"), "policy 'tsa': layers=" + text("layers"));
      if (listed != null) {
        for (int l : listed) {
          if (l >= layers) {
            throw new IllegalArgumentException("policy 'tsa': layers=" + text("layers") + " names layer " + l
                + ", but the model has numLayers " + layers + " (layers 0-" + (layers - 1) + ")");
          }
        }
      }
    } else if (name.equals("quest") && intParam("dense_layers") > layers) {
      throw new IllegalArgumentException("policy 'quest': dense_layers=" + intParam("dense_layers")
          + " is more than the model's numLayers " + layers);
    }
  }

  private static String known(Entry e) {
    return e.params().isEmpty() ? "; it takes no parameters" : "; known: " + String.join(", ", e.keys());
  }

  // Plain decimal numbers only: Java's parsers also take "1f", "0x1p3" and "Infinity"
  private static final Pattern INTEGER = Pattern.compile("[+-]?\\d+");
  private static final Pattern DECIMAL = Pattern.compile("[+-]?(\\d+\\.?\\d*|\\.\\d+)(e[+-]?\\d+)?");

  /** {@code value} as {@link #parse} stores it (the default of {@code p}, say), for comparisons. */
  static String normalised(String name, Param p, String value) {
    return normalise(name, p, value);
  }

  private static String normalise(String name, Param p, String value) {
    String where = "policy '" + name + "': " + p.key() + "=" + value;
    ParamRange range = p.range();
    switch (p.kind()) {
      case INT: {
        if (!INTEGER.matcher(value).matches()) throw new IllegalArgumentException(where + " is not an integer");
        long v;
        try {
          v = Long.parseLong(value);
        } catch (NumberFormatException overflow) { // digits only, so it is beyond a long
          v = value.startsWith("-") ? Long.MIN_VALUE : Long.MAX_VALUE;
        }
        if (range.above(v)) throw new IllegalArgumentException(where + " is too large (at most " + (long) range.max() + ")");
        if (!range.contains(v)) throw new IllegalArgumentException(where + " must be >= " + (long) range.min());
        return Long.toString(v);
      }
      case NUMBER: {
        if (!DECIMAL.matcher(value).matches()) throw new IllegalArgumentException(where + " is not a number");
        double v = Double.parseDouble(value);
        if (Double.isInfinite(v) && v > 0) throw new IllegalArgumentException(where + " is too large (must be in " + range.text() + ")");
        if (Double.isInfinite(v) || !range.contains(v)) throw new IllegalArgumentException(where + " must be in " + range.text());
        return Double.toString(v);
      }
      case CHOICE:
        for (String c : p.choices().split("\\|")) if (c.equals(value)) return value;
        throw new IllegalArgumentException(where + " is not one of " + p.choices().replace("|", ", "));
      case LAYERS:
        LayerList.parse(value, where); // validates
        return value;
      default:
        throw new AssertionError(p.kind());
    }
  }

  /** This term with one parameter's text replaced (for the resolved form only: no validation). */
  PolicyTerm withText(String key, String value) {
    Map<String, String> m = new LinkedHashMap<>(params);
    m.put(key, value);
    return new PolicyTerm(name, m);
  }

  public String text(String key) {
    String v = params.get(key);
    if (v == null) throw new IllegalStateException(name + " has no parameter " + key);
    return v;
  }

  public int intParam(String key) {
    return Integer.parseInt(text(key));
  }

  public double doubleParam(String key) {
    return Double.parseDouble(text(key));
  }

  /** {@code name:k=v,...} with every parameter, or just the name when it takes none. */
  public String canonical() {
    if (params.isEmpty()) return name;
    StringBuilder b = new StringBuilder(name).append(':');
    boolean first = true;
    for (Map.Entry<String, String> en : params.entrySet()) {
      if (!first) b.append(',');
      b.append(en.getKey()).append('=').append(en.getValue());
      first = false;
    }
    return b.toString();
  }
}
