package io.longsieve.model;

/**
 * Rewrites of Jinja syntax that Jinjava parses differently from Python's Jinja2, applied to a chat
 * template's text before it is compiled (the template is code from the checkpoint; messages never
 * pass through here). Each rewrite keeps Jinja2's meaning:
 *
 * <ul>
 *   <li>a keyword argument's value is parenthesised, {@code f(a=x|length - 1)} → {@code f(a=(x|length - 1))}:
 *       Jinjava binds {@code =} tighter than arithmetic and fails on Qwen3's
 *       {@code namespace(..., last_query_index=messages|length - 1)};
 *   <li>a reversing slice {@code x[::-1]} becomes {@code (x|reverse|list)} (Qwen3 walks its messages
 *       backwards): Jinjava's slices take no step.
 * </ul>
 *
 * Only the inside of {@code {{ }}} and {@code {% %}} tags is touched, string literals are copied as
 * they are, and the scan is linear in the template's length.
 */
final class JinjaCompat {
  private JinjaCompat() {}

  static String rewrite(String t) {
    StringBuilder out = new StringBuilder(t.length() + 64);
    int i = 0;
    while (i < t.length()) {
      int open = nextTag(t, i);
      if (open < 0) {
        out.append(t, i, t.length());
        break;
      }
      out.append(t, i, open + 2);
      String close = t.charAt(open + 1) == '{' ? "}}" : "%}";
      int end = endOfTag(t, open + 2, close);
      out.append(expression(t.substring(open + 2, end)));
      i = end;
    }
    return out.toString();
  }

  /** The next "{{" or "{%" at or after from (a "{#" comment is skipped whole), or -1. */
  private static int nextTag(String t, int from) {
    for (int i = from; i + 1 < t.length(); i++) {
      if (t.charAt(i) != '{') continue;
      char c = t.charAt(i + 1);
      if (c == '{' || c == '%') return i;
      if (c == '#') {
        int e = t.indexOf("#}", i + 2);
        if (e < 0) return -1;
        i = e + 1;
      }
    }
    return -1;
  }

  /** Where the tag's closer starts, skipping string literals; the text's end when there is none. */
  private static int endOfTag(String t, int from, String close) {
    for (int i = from; i < t.length(); i++) {
      char c = t.charAt(i);
      if (c == '\'' || c == '"') {
        i = endOfString(t, i);
      } else if (t.startsWith(close, i)) {
        return i;
      }
    }
    return t.length();
  }

  /** The index of the quote that closes the literal opening at i (backslash escapes honoured). */
  private static int endOfString(String t, int i) {
    char q = t.charAt(i);
    for (int j = i + 1; j < t.length(); j++) {
      if (t.charAt(j) == '\\') j++;
      else if (t.charAt(j) == q) return j;
    }
    return t.length() - 1;
  }

  /** One tag's inside with the two rewrites applied. */
  static String expression(String e) {
    StringBuilder out = new StringBuilder(e.length() + 16);
    // per open bracket: its kind, and whether a keyword value opened at this depth awaits its ')'
    char[] kind = new char[e.length() + 1];
    boolean[] valueOpen = new boolean[e.length() + 1];
    int depth = 0;
    boolean argStart = false;  // just after '(' or a ',' directly inside '('
    for (int i = 0; i < e.length(); i++) {
      char c = e.charAt(i);
      if (c == '\'' || c == '"') {
        int j = endOfString(e, i);
        out.append(e, i, j + 1);
        i = j;
        argStart = false;
        continue;
      }
      if (argStart && (Character.isLetter(c) || c == '_')) {
        int j = i;
        while (j < e.length() && (Character.isLetterOrDigit(e.charAt(j)) || e.charAt(j) == '_')) j++;
        int k = j;
        while (k < e.length() && e.charAt(k) == ' ') k++;
        if (k < e.length() && e.charAt(k) == '=' && (k + 1 >= e.length() || e.charAt(k + 1) != '=')) {
          out.append(e, i, k + 1).append('(');
          valueOpen[depth] = true;
          i = k;
          argStart = false;
          continue;
        }
      }
      if (!Character.isWhitespace(c)) argStart = false;
      if (c == '[' && e.startsWith("[::-1]", i)) {
        reverseLast(out);
        i += "[::-1]".length() - 1;
        continue;
      }
      if (c == '(' || c == '[' || c == '{') {
        out.append(c);
        depth++;
        kind[depth] = c;
        valueOpen[depth] = false;
        argStart = c == '(';
        continue;
      }
      if (c == ')' || c == ']' || c == '}') {
        if (depth > 0 && valueOpen[depth]) out.append(')');
        if (depth > 0) depth--;
        out.append(c);
        continue;
      }
      if (c == ',' && depth > 0 && kind[depth] == '(') {
        if (valueOpen[depth]) out.append(')');
        valueOpen[depth] = false;
        out.append(c);
        argStart = true;
        continue;
      }
      out.append(c);
    }
    return out.toString();
  }

  /**
   * Replaces the operand just written (a dotted name with subscripts or a call, e.g. {@code messages}
   * or {@code a.b[0]}) by {@code (operand|reverse|list)}.
   */
  private static void reverseLast(StringBuilder out) {
    int j = out.length();
    int nest = 0;
    while (j > 0) {
      char c = out.charAt(j - 1);
      if (c == ')' || c == ']') nest++;
      else if (c == '(' || c == '[') {
        if (nest == 0) break;
        nest--;
      } else if (nest == 0 && !(Character.isLetterOrDigit(c) || c == '_' || c == '.')) {
        break;
      }
      j--;
    }
    String operand = out.substring(j);
    out.setLength(j);
    out.append('(').append(operand).append("|reverse|list)");
  }
}
