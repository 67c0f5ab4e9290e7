package io.longsieve.structured;

import dk.brics.automaton.Automaton;
import dk.brics.automaton.BasicAutomata;
import dk.brics.automaton.RunAutomaton;
import java.util.ArrayList;
import java.util.List;

/**
 * A JSON Schema {@code pattern} (an ECMA-262 regular expression, matched anywhere in the string
 * unless anchored) as a DFA, built with dk.brics.automaton. brics parses its own syntax, which differs
 * from ECMA's ({@code & ~ @ # < >} are operators there, {@code \d} and {@code ^ $} are not), so this
 * class parses the ECMA subset itself and builds the automaton through brics' operations.
 *
 * <p>The subset: literals and escaped punctuation; {@code .}; classes {@code [a-z]}, {@code [^...]} with
 * {@code \d \w \s} inside; {@code \d \D \w \W \s \S \t \n \r \f \v \0 \xHH \\uHHHH}; groups {@code (...)}
 * and {@code (?:...)}; {@code |}; quantifiers {@code * + ? {n} {n,} {n,m}} (a lazy {@code ?} after
 * them is accepted: it does not change which strings match); {@code ^} at the start and {@code $} at
 * the end of the whole pattern. Refused, naming the construct: back-references, lookaround, word
 * boundaries, named groups, Unicode property escapes. The alphabet is the Basic Multilingual Plane
 * without surrogates: a string under a pattern holds no character above U+FFFF.
 */
final class EcmaPattern {

  private final String src;
  private final String path;
  private int at;
  private boolean topLevelAlternation;

  private EcmaPattern(String src, String path) {
    this.src = src;
    this.path = path;
  }

  /** The DFA of strings the pattern matches (search semantics), over BMP characters without surrogates. */
  static RunAutomaton compile(String pattern, String path) {
    EcmaPattern p = new EcmaPattern(pattern, path);
    boolean startAnchored = pattern.startsWith("^");
    if (startAnchored) p.at = 1;
    int end = pattern.length();
    boolean endAnchored = end > p.at && pattern.charAt(end - 1) == '$' && !escaped(pattern, end - 1);
    String body = pattern.substring(p.at, endAnchored ? end - 1 : end);
    EcmaPattern inner = new EcmaPattern(body, path);
    Automaton a = inner.alternation(0);
    if (inner.at != body.length()) throw inner.error("unbalanced ')' at character " + (inner.at + p.at));
    if (inner.topLevelAlternation && (startAnchored || endAnchored)) {
      throw inner.error("an anchor next to a top-level '|' applies to one branch only: write ^(a|b)$");
    }
    Automaton any = anyChar().repeat();
    if (!startAnchored) a = any.concatenate(a);
    if (!endAnchored) a = a.concatenate(any);
    a = a.intersection(anyChar().repeat());
    a.minimize();
    if (a.isEmpty()) throw new SchemaException("pattern", path, "no string matches /" + pattern + "/");
    return new RunAutomaton(a);
  }

  private static boolean escaped(String s, int i) {
    int n = 0;
    for (int j = i - 1; j >= 0 && s.charAt(j) == '\\'; j--) n++;
    return n % 2 == 1;
  }

  /** One character of the alphabet: the BMP without surrogates. */
  static Automaton anyChar() {
    return BasicAutomata.makeCharRange('\u0000', '\uD7FF').union(BasicAutomata.makeCharRange('\uE000', '\uFFFF'));
  }

  private Automaton alternation(int level) {
    List<Automaton> branches = new ArrayList<>();
    branches.add(concat(level));
    while (at < src.length() && src.charAt(at) == '|') {
      if (level == 0) topLevelAlternation = true;
      at++;
      branches.add(concat(level));
    }
    return branches.size() == 1 ? branches.get(0) : Automaton.union(branches);
  }

  private Automaton concat(int level) {
    List<Automaton> parts = new ArrayList<>();
    while (at < src.length() && src.charAt(at) != '|' && src.charAt(at) != ')') parts.add(repeat(level));
    return parts.isEmpty() ? BasicAutomata.makeEmptyString() : Automaton.concatenate(parts);
  }

  private Automaton repeat(int level) {
    Automaton a = atom(level);
    while (at < src.length()) {
      char c = src.charAt(at);
      if (c == '*') {
        at++;
        a = a.repeat();
      } else if (c == '+') {
        at++;
        a = a.repeat(1);
      } else if (c == '?') {
        at++;
        a = a.optional();
      } else if (c == '{' && quantifierAhead()) {
        at++;
        int min = number();
        int max = min;
        if (src.charAt(at) == ',') {
          at++;
          max = src.charAt(at) == '}' ? -1 : number();
        }
        at++; // '}'
        if (max >= 0 && max < min) throw error("{" + min + "," + max + "} has max < min");
        if (Math.max(min, max) > 1000) throw error("a repetition count above 1000");
        a = max < 0 ? a.repeat(min) : a.repeat(min, max);
      } else {
        break;
      }
      if (at < src.length() && src.charAt(at) == '?') at++; // lazy: the same strings match
    }
    return a;
  }

  private boolean quantifierAhead() {
    int i = at + 1;
    int digits = 0;
    while (i < src.length() && Character.isDigit(src.charAt(i))) {
      i++;
      digits++;
    }
    if (digits == 0 || i >= src.length()) return false;
    if (src.charAt(i) == '}') return true;
    if (src.charAt(i) != ',') return false;
    i++;
    while (i < src.length() && Character.isDigit(src.charAt(i))) i++;
    return i < src.length() && src.charAt(i) == '}';
  }

  private int number() {
    int start = at;
    while (Character.isDigit(src.charAt(at))) at++;
    return Integer.parseInt(src.substring(start, at));
  }

  private Automaton atom(int level) {
    char c = src.charAt(at);
    switch (c) {
      case '(' -> {
        at++;
        if (src.startsWith("?:", at)) {
          at += 2;
        } else if (src.startsWith("?", at)) {
          throw error("lookaround and named groups '(" + src.substring(at, Math.min(src.length(), at + 3)) + "' are not supported");
        }
        Automaton a = alternation(level + 1);
        if (at >= src.length() || src.charAt(at) != ')') throw error("a '(' is not closed");
        at++;
        return a;
      }
      case '[' -> {
        return charClass();
      }
      case '.' -> {
        at++;
        return anyChar().minus(chars("\n\r\u2028\u2029"));
      }
      case '\\' -> {
        at++;
        return escape(false);
      }
      case '^', '$' -> throw error("'" + c + "' is supported at the start and end of the whole pattern only");
      case '*', '+', '?' -> throw error("'" + c + "' with nothing to repeat");
      case ')' -> throw error("unbalanced ')'");
      default -> {
        at++;
        return BasicAutomata.makeChar(c);
      }
    }
  }

  /** After a backslash: a class escape, a control escape or an escaped literal. */
  private Automaton escape(boolean inClass) {
    if (at >= src.length()) throw error("a trailing '\\'");
    char c = src.charAt(at++);
    return switch (c) {
      case 'd' -> digit();
      case 'D' -> anyChar().minus(digit());
      case 'w' -> word();
      case 'W' -> anyChar().minus(word());
      case 's' -> space();
      case 'S' -> anyChar().minus(space());
      case 't' -> BasicAutomata.makeChar('\t');
      case 'n' -> BasicAutomata.makeChar('\n');
      case 'r' -> BasicAutomata.makeChar('\r');
      case 'f' -> BasicAutomata.makeChar('\f');
      case 'v' -> BasicAutomata.makeChar('\u000B');
      case '0' -> BasicAutomata.makeChar('\0');
      case 'x' -> BasicAutomata.makeChar((char) hex(2));
      case 'u' -> BasicAutomata.makeChar((char) hex(4));
      case 'b' -> {
        if (inClass) yield BasicAutomata.makeChar('\b');
        throw error("word boundaries (\\b) are not supported");
      }
      case 'B' -> throw error("word boundaries (\\B) are not supported");
      case 'p', 'P' -> throw error("Unicode property escapes (\\" + c + ") are not supported");
      case 'k' -> throw error("named back-references (\\k) are not supported");
      default -> {
        if (c >= '1' && c <= '9') throw error("back-references (\\" + c + ") are not supported");
        if (Character.isLetterOrDigit(c)) throw error("unknown escape \\" + c);
        yield BasicAutomata.makeChar(c);
      }
    };
  }

  private int hex(int digits) {
    if (at + digits > src.length()) throw error("a short hex escape");
    try {
      int v = Integer.parseInt(src.substring(at, at + digits), 16);
      at += digits;
      return v;
    } catch (NumberFormatException e) {
      throw error("a bad hex escape '" + src.substring(at, at + digits) + "'");
    }
  }

  private Automaton charClass() {
    at++; // '['
    boolean negate = at < src.length() && src.charAt(at) == '^';
    if (negate) at++;
    Automaton set = BasicAutomata.makeEmpty();
    boolean first = true;
    while (true) {
      if (at >= src.length()) throw error("a '[' is not closed");
      char c = src.charAt(at);
      if (c == ']' && !first) {
        at++;
        break;
      }
      first = false;
      Automaton lo = classAtom();
      if (at + 1 < src.length() && src.charAt(at) == '-' && src.charAt(at + 1) != ']') {
        at++;
        Automaton hi = classAtom();
        char from = single(lo), to = single(hi);
        if (to < from) throw error("a class range " + from + "-" + to + " out of order");
        set = set.union(BasicAutomata.makeCharRange(from, to));
      } else {
        set = set.union(lo);
      }
    }
    return negate ? anyChar().minus(set) : set;
  }

  private Automaton classAtom() {
    char c = src.charAt(at++);
    if (c == '\\') return escape(true);
    return BasicAutomata.makeChar(c);
  }

  private char single(Automaton a) {
    String s = a.getSingleton();
    if (s == null || s.length() != 1) throw error("a class range needs single characters at both ends");
    return s.charAt(0);
  }

  private static Automaton digit() {
    return BasicAutomata.makeCharRange('0', '9');
  }

  private static Automaton word() {
    return BasicAutomata.makeCharRange('a', 'z').union(BasicAutomata.makeCharRange('A', 'Z')).union(digit())
        .union(BasicAutomata.makeChar('_'));
  }

  /** ECMA-262's WhiteSpace and LineTerminator characters. */
  private static Automaton space() {
    return chars("\t\n\u000B\f\r \u00A0\u1680\u2028\u2029\u202F\u205F\u3000\uFEFF")
        .union(BasicAutomata.makeCharRange('\u2000', '\u200A'));
  }

  private static Automaton chars(String s) {
    return BasicAutomata.makeCharSet(s);
  }

  private SchemaException error(String what) {
    return new SchemaException("pattern", path, what + " in /" + src + "/");
  }
}
