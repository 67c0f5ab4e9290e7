package io.longsieve.model;

import java.beans.FeatureDescriptor;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Iterator;
import java.util.List;
import jinjava.javax.el.ELContext;
import jinjava.javax.el.ELResolver;

/**
 * The Python str methods chat templates call on strings ({@code content.startswith('<tool_response>')},
 * {@code content.split('</think>')[-1].lstrip('\n')}: Qwen3's and the DeepSeek-R1 distills'), with
 * Python's meaning, for Jinjava, which otherwise finds Java's methods by name: none for
 * {@code startswith} or {@code lstrip}, and a regex {@code split} that drops trailing empty parts.
 * Jinja2 in transformers runs these as the Python methods. Pure functions of their arguments: they
 * read and make strings, nothing else, so the sandbox stays as it was; the output bounds of
 * {@link TemplateLimits} still hold what a template prints.
 */
final class PythonStringMethods extends ELResolver {

  @Override
  public Object invoke(ELContext context, Object base, Object method, Class<?>[] paramTypes, Object[] params) {
    if (!(base instanceof String s) || !(method instanceof String m)) return null;
    Object[] p = params == null ? new Object[0] : params;
    Object result;
    switch (m) {
      case "startswith" -> result = p.length == 1 ? anyOf(p[0], s::startsWith) : null;
      case "endswith" -> result = p.length == 1 ? anyOf(p[0], s::endsWith) : null;
      case "strip" -> result = p.length <= 1 ? rstrip(lstrip(s, chars(p)), chars(p)) : null;
      case "lstrip" -> result = p.length <= 1 ? lstrip(s, chars(p)) : null;
      case "rstrip" -> result = p.length <= 1 ? rstrip(s, chars(p)) : null;
      case "split" -> result = p.length <= 2 ? split(s, p.length > 0 && p[0] != null ? p[0].toString() : null,
          p.length > 1 ? ((Number) p[1]).intValue() : -1) : null;
      case "upper" -> result = p.length == 0 ? s.toUpperCase(java.util.Locale.ROOT) : null;
      case "lower" -> result = p.length == 0 ? s.toLowerCase(java.util.Locale.ROOT) : null;
      case "replace" -> result = p.length == 2 ? s.replace(p[0].toString(), p[1].toString()) : null;
      case "find" -> result = p.length == 1 ? (long) s.indexOf(p[0].toString()) : null;
      case "join" -> result = p.length == 1 && p[0] instanceof Collection<?> c ? join(s, c) : null;
      default -> result = null;
    }
    if (result == null) return null;  // not ours: Jinjava's own resolvers try next
    context.setPropertyResolved(true);
    return result;
  }

  private static Boolean anyOf(Object arg, java.util.function.Predicate<String> test) {
    if (arg instanceof Collection<?> c) {  // Python accepts a tuple of prefixes
      for (Object o : c) if (test.test(String.valueOf(o))) return true;
      return false;
    }
    return test.test(String.valueOf(arg));
  }

  /** The characters to strip: the argument, or null for Python's whitespace. */
  private static String chars(Object[] p) {
    return p.length == 0 || p[0] == null ? null : p[0].toString();
  }

  private static boolean strips(char c, String chars) {
    return chars == null ? Character.isWhitespace(c) || Character.isSpaceChar(c) : chars.indexOf(c) >= 0;
  }

  static String lstrip(String s, String chars) {
    int i = 0;
    while (i < s.length() && strips(s.charAt(i), chars)) i++;
    return s.substring(i);
  }

  static String rstrip(String s, String chars) {
    int i = s.length();
    while (i > 0 && strips(s.charAt(i - 1), chars)) i--;
    return s.substring(0, i);
  }

  /** Python's str.split: on a literal separator keeping empty parts, or on whitespace runs (sep null). */
  static List<String> split(String s, String sep, int maxSplit) {
    List<String> out = new ArrayList<>();
    if (sep == null) {
      int i = 0;
      while (true) {
        while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++;
        if (i >= s.length()) break;
        if (maxSplit >= 0 && out.size() == maxSplit) {
          out.add(rstrip(s.substring(i), null));
          break;
        }
        int j = i;
        while (j < s.length() && !Character.isWhitespace(s.charAt(j))) j++;
        out.add(s.substring(i, j));
        i = j;
      }
      return out;
    }
    if (sep.isEmpty()) throw new IllegalArgumentException("empty separator");
    int from = 0;
    while (maxSplit < 0 || out.size() < maxSplit) {
      int at = s.indexOf(sep, from);
      if (at < 0) break;
      out.add(s.substring(from, at));
      from = at + sep.length();
    }
    out.add(s.substring(from));
    return out;
  }

  private static String join(String sep, Collection<?> parts) {
    StringBuilder b = new StringBuilder();
    boolean first = true;
    for (Object o : parts) {
      if (!first) b.append(sep);
      b.append(o);
      first = false;
    }
    return b.toString();
  }

  // property access is not this resolver's business: the next resolver answers
  @Override
  public Object getValue(ELContext context, Object base, Object property) {
    return null;
  }

  @Override
  public Class<?> getType(ELContext context, Object base, Object property) {
    return null;
  }

  @Override
  public void setValue(ELContext context, Object base, Object property, Object value) {}

  @Override
  public boolean isReadOnly(ELContext context, Object base, Object property) {
    return true;
  }

  @Override
  public Iterator<FeatureDescriptor> getFeatureDescriptors(ELContext context, Object base) {
    return null;
  }

  @Override
  public Class<?> getCommonPropertyType(ELContext context, Object base) {
    return null;
  }
}
