package io.longsieve.attention;

import io.longsieve.attention.PolicyCatalog.Entry;
import io.longsieve.attention.PolicyCatalog.Param;
import java.io.Serializable;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

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
    return new PolicyTerm(name, all);
  }

  private static String known(Entry e) {
    return e.params().isEmpty() ? "; it takes no parameters" : "; known: " + String.join(", ", e.keys());
  }

  private static String normalise(String name, Param p, String value) {
    String where = "policy '" + name + "': " + p.key() + "=" + value;
    switch (p.kind()) {
      case INT: {
        int v;
        try {
          v = Integer.parseInt(value);
        } catch (NumberFormatException ex) {
          throw new IllegalArgumentException(where + " is not an integer");
        }
        if (v < 0) throw new IllegalArgumentException(where + " must be >= 0");
        return Integer.toString(v);
      }
      case FRACTION:
      case DOUBLE: {
        double v;
        try {
          v = Double.parseDouble(value);
        } catch (NumberFormatException ex) {
          throw new IllegalArgumentException(where + " is not a number");
        }
        if (!Double.isFinite(v)) throw new IllegalArgumentException(where + " must be finite");
        if (p.kind() == Param.Kind.FRACTION && (v < 0 || v > 1)) throw new IllegalArgumentException(where + " must be in [0, 1]");
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
