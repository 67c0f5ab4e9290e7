package io.longsieve.structured;

import io.longsieve.structured.SchemaNode.AnyOfNode;
import io.longsieve.structured.SchemaNode.ArrayNode;
import io.longsieve.structured.SchemaNode.LiteralNode;
import io.longsieve.structured.SchemaNode.NumberNode;
import io.longsieve.structured.SchemaNode.ObjectNode;
import io.longsieve.structured.SchemaNode.Property;
import io.longsieve.structured.SchemaNode.StringNode;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.Set;

/**
 * The grammar of the JSON documents a schema allows, run byte by byte: a pushdown automaton whose
 * configurations are immutable stacks of frames ({@link Config}: the value being written on top, its
 * containers below), and whose state is the set of configurations still possible ({@link MatchState};
 * anyOf keeps one per live alternative). A byte that leaves no configuration is not allowed; a state
 * that accepts {@link #END} holds a complete document. Hand-written because no kept Java library runs a
 * JSON Schema as an incremental byte automaton; patterns inside strings use dk.brics DFAs.
 *
 * <p>What it writes, beyond the schema (docs/structured-output.md): properties in declared order;
 * at most {@link #MAX_WHITESPACE} whitespace bytes between two tokens, none after the document;
 * numbers in {@link NumberText}'s form; strings as valid UTF-8, escapes {@code \" \\ \/ \b \f \n \r \t}
 * and {@code \\uXXXX} outside the surrogates; nesting at most {@link #MAX_DEPTH} objects and arrays.
 * Every state it reaches can still be completed into a valid document (minDepth, NumberText.live,
 * PatternReach keep it so), so the allowed set of a live state is never empty.
 */
final class JsonMatcher {

  /** Objects and arrays nested at most this deep; a $ref cycle is cut here. */
  static final int MAX_DEPTH = 16;
  /** Whitespace bytes allowed between two tokens: JSON allows any, a model could loop on it. */
  static final int MAX_WHITESPACE = 8;
  /** The end of the text, stepped to ask whether a state holds a complete document. */
  static final int END = -1;

  private static final int OPEN = 0, KEY = 1, COLON = 2, VALUE_WS = 3, VALUE = 4, AFTER = 5, COMMA = 6;

  sealed interface Frame permits Doc, Obj, Arr, Str, Num, Lit {}

  /** The document: phase 0 before the value (ws whitespace so far), 1 in it, 2 after it. */
  record Doc(int phase, int ws) implements Frame {}

  /** An object: phase, the property index (the first candidate while in a key), whitespace, key candidate and bytes of its key matched. */
  record Obj(ObjectNode node, int phase, int idx, int ws, int cand, int off) implements Frame {}

  /** An array: phase (OPEN, VALUE, AFTER, COMMA), items so far, whitespace. */
  record Arr(ArrayNode node, int phase, int count, int ws) implements Frame {}

  /**
   * A string after its opening quote: code points so far (when counted), escape state (1 after a
   * backslash, 2..5 in a \\u with esc-2 hex digits in cp), UTF-8 continuation bytes still needed with
   * the code point so far and the next byte's range, and the pattern DFA's state.
   */
  record Str(StringNode node, int len, int esc, int need, int cp, int lo, int hi, int dfa) implements Frame {}

  /** A number: its text so far. */
  record Num(NumberNode node, String text) implements Frame {}

  /** A literal: the lowest candidate matching so far and the bytes matched. */
  record Lit(LiteralNode node, int cand, int off) implements Frame {}

  /** An immutable stack of frames; equal stacks are equal values (the mask cache's keys are sets of them). */
  static final class Config {
    final Frame top;
    final Config rest;
    final int containers; // Obj and Arr frames in this stack
    private final int hash;

    Config(Frame top, Config rest) {
      this.top = top;
      this.rest = rest;
      this.containers = (rest == null ? 0 : rest.containers) + (top instanceof Obj || top instanceof Arr ? 1 : 0);
      this.hash = 31 * top.hashCode() + (rest == null ? 0 : rest.hash);
    }

    Config replace(Frame f) {
      return new Config(f, rest);
    }

    Config push(Frame f) {
      return new Config(f, this);
    }

    @Override
    public boolean equals(Object o) {
      if (this == o) return true;
      if (!(o instanceof Config c) || c.hash != hash) return false;
      Config a = this, b = c;
      while (a != null && b != null) {
        if (a == b) return true;
        if (a.hash != b.hash || !a.top.equals(b.top)) return false;
        a = a.rest;
        b = b.rest;
      }
      return a == b;
    }

    @Override
    public int hashCode() {
      return hash;
    }
  }

  private static final Config ACCEPTED = new Config(new Doc(3, 0), null);

  private final SchemaNode root;

  JsonMatcher(SchemaNode root) {
    this.root = root;
  }

  /** Before the first byte. */
  MatchState start() {
    return new MatchState(Set.of(new Config(new Doc(0, 0), null)));
  }

  /** The state after byte b (0..255), or null when b is not allowed. */
  MatchState step(MatchState s, int b) {
    Set<Config> out = new LinkedHashSet<>();
    for (Config c : s.configs()) step(c, b, out);
    return out.isEmpty() ? null : new MatchState(out);
  }

  /** The state after {@code bytes}, or null when they are not allowed. */
  MatchState step(MatchState s, byte[] bytes) {
    for (int i = 0; i < bytes.length && s != null; i++) s = step(s, bytes[i] & 0xff);
    return s;
  }

  /** Whether the bytes so far are a whole document. */
  boolean accepts(MatchState s) {
    Set<Config> out = new LinkedHashSet<>();
    for (Config c : s.configs()) step(c, END, out);
    return out.contains(ACCEPTED);
  }

  private void step(Config c, int b, Collection<Config> out) {
    Frame f = c.top;
    if (f instanceof Str s) string(c, s, b, out); // the most frequent first
    else if (f instanceof Obj o) object(c, o, b, out);
    else if (f instanceof Num n) number(c, n, b, out);
    else if (f instanceof Lit l) literal(c, l, b, out);
    else if (f instanceof Arr a) array(c, a, b, out);
    else doc(c, (Doc) f, b, out);
  }

  private static boolean ws(int b) {
    return b == ' ' || b == '\n' || b == '\t' || b == '\r';
  }

  private void doc(Config c, Doc d, int b, Collection<Config> out) {
    if (d.phase() == 0) {
      if (ws(b)) {
        if (d.ws() < MAX_WHITESPACE) out.add(c.replace(new Doc(0, d.ws() + 1)));
      } else if (b != END) {
        start(root, c.replace(new Doc(1, 0)), b, out);
      }
    } else if (d.phase() == 2 && b == END) {
      out.add(ACCEPTED);
    }
  }

  /** The first byte of a value of {@code node} under {@code parent}, whose top waits for it. */
  private void start(SchemaNode node, Config parent, int b, Collection<Config> out) {
    node = SchemaNode.resolve(node);
    if (parent.containers + node.minDepth > MAX_DEPTH) return;
    if (node instanceof AnyOfNode any) {
      for (SchemaNode alt : any.alternatives) start(alt, parent, b, out);
    } else if (node instanceof ObjectNode o) {
      if (b == '{') out.add(parent.push(new Obj(o, OPEN, 0, 0, 0, 0)));
    } else if (node instanceof ArrayNode a) {
      if (b == '[') out.add(parent.push(new Arr(a, OPEN, 0, 0)));
    } else if (node instanceof StringNode s) {
      if (b == '"') out.add(parent.push(new Str(s, 0, 0, 0, 0, 0, 0, s.pattern == null ? 0 : s.pattern.getInitialState())));
    } else if (node instanceof NumberNode n) {
      if (b == '-' || b >= '0' && b <= '9') {
        String text = String.valueOf((char) b);
        if (NumberText.live(n, text)) out.add(parent.push(new Num(n, text)));
      }
    } else if (node instanceof LiteralNode l) {
      for (int p = 0; p < l.literals.size(); p++) {
        if ((l.literals.get(p)[0] & 0xff) == b) {
          out.add(parent.push(new Lit(l, p, 1)));
          break;
        }
      }
    } else {
      throw new IllegalStateException("unresolved " + node.path);
    }
  }

  /** The stack below a finished value, its top moved past the value. */
  private static Config done(Config rest) {
    Frame f = rest.top;
    if (f instanceof Obj o) return rest.replace(new Obj(o.node(), AFTER, o.idx(), 0, 0, 0));
    if (f instanceof Arr a) return rest.replace(new Arr(a.node(), AFTER, a.count(), 0));
    if (f instanceof Doc) return rest.replace(new Doc(2, 0));
    throw new IllegalStateException("a value inside " + f);
  }

  private boolean fits(Config c, SchemaNode node) {
    return c.containers + node.minDepth <= MAX_DEPTH;
  }

  private void object(Config c, Obj o, int b, Collection<Config> out) {
    ObjectNode node = o.node();
    int phase = o.phase();
    if (phase != KEY && phase != VALUE && ws(b)) {
      if (o.ws() < MAX_WHITESPACE) out.add(c.replace(new Obj(node, phase, o.idx(), o.ws() + 1, 0, 0)));
      return;
    }
    switch (phase) {
      case OPEN, COMMA -> {
        int from = phase == OPEN ? 0 : o.idx() + 1;
        if (b == '"') {
          int p = firstCandidate(c, node, from);
          if (p >= 0) out.add(c.replace(new Obj(node, KEY, from, 0, p, 1)));
        } else if (b == '}' && phase == OPEN && !node.requiresFrom(0)) {
          out.add(done(c.rest));
        }
      }
      case KEY -> key(c, o, b, out);
      case COLON -> {
        if (b == ':') out.add(c.replace(new Obj(node, VALUE_WS, o.idx(), 0, 0, 0)));
      }
      case VALUE_WS -> {
        if (b != END) start(node.properties.get(o.idx()).node(), c.replace(new Obj(node, VALUE, o.idx(), 0, 0, 0)), b, out);
      }
      case AFTER -> {
        if (b == ',' && firstCandidate(c, node, o.idx() + 1) >= 0) {
          out.add(c.replace(new Obj(node, COMMA, o.idx(), 0, 0, 0)));
        } else if (b == '}' && !node.requiresFrom(o.idx() + 1)) {
          out.add(done(c.rest));
        }
      }
      default -> throw new IllegalStateException("object phase " + phase);
    }
  }

  /** The first property from {@code from} whose key may come next and whose value fits the depth; -1: none. */
  private int firstCandidate(Config c, ObjectNode node, int from) {
    int last = node.lastCandidate(from);
    for (int p = from; p <= last; p++) if (fits(c, node.properties.get(p).node())) return p;
    return -1;
  }

  private void key(Config c, Obj o, int b, Collection<Config> out) {
    ObjectNode node = o.node();
    byte[] cur = node.properties.get(o.cand()).keyLiteral();
    int off = o.off();
    int last = node.lastCandidate(o.idx());
    for (int p = o.cand(); p <= last; p++) {
      Property prop = node.properties.get(p);
      byte[] k = prop.keyLiteral();
      if (k.length <= off || (k[off] & 0xff) != b || !samePrefix(k, cur, off) || !fits(c, prop.node())) continue;
      if (off + 1 == k.length) out.add(c.replace(new Obj(node, COLON, p, 0, 0, 0)));
      else out.add(c.replace(new Obj(node, KEY, o.idx(), 0, p, off + 1)));
      return;
    }
  }

  private static boolean samePrefix(byte[] a, byte[] b, int n) {
    if (a == b) return true;
    for (int i = 0; i < n; i++) if (a[i] != b[i]) return false;
    return true;
  }

  private void array(Config c, Arr a, int b, Collection<Config> out) {
    ArrayNode node = a.node();
    if (ws(b)) {
      if (a.ws() < MAX_WHITESPACE) out.add(c.replace(new Arr(node, a.phase(), a.count(), a.ws() + 1)));
      return;
    }
    switch (a.phase()) {
      case OPEN -> {
        if (b == ']') {
          if (node.minItems == 0) out.add(done(c.rest));
        } else if (node.maxItems >= 1 && b != END) {
          start(node.items, c.replace(new Arr(node, VALUE, 1, 0)), b, out);
        }
      }
      case AFTER -> {
        if (b == ',' && a.count() < node.maxItems && fits(c, node.items)) {
          out.add(c.replace(new Arr(node, COMMA, a.count(), 0)));
        } else if (b == ']' && a.count() >= node.minItems) {
          out.add(done(c.rest));
        }
      }
      case COMMA -> {
        if (b != END) start(node.items, c.replace(new Arr(node, VALUE, a.count() + 1, 0)), b, out);
      }
      default -> throw new IllegalStateException("array phase " + a.phase());
    }
  }

  private void string(Config c, Str s, int b, Collection<Config> out) {
    StringNode node = s.node();
    if (b == END) return;
    if (s.need() > 0) { // a UTF-8 continuation byte
      if (b < s.lo() || b > s.hi()) return;
      int cp = s.cp() << 6 | b & 0x3f;
      if (s.need() == 1) emit(c, s, cp, out);
      else if (partial(s, cp, s.need() - 1)) out.add(c.replace(new Str(node, s.len(), 0, s.need() - 1, cp, 0x80, 0xbf, s.dfa())));
      return;
    }
    if (s.esc() == 1) {
      int ch = switch (b) {
        case '"', '\\', '/' -> b;
        case 'b' -> '\b';
        case 'f' -> '\f';
        case 'n' -> '\n';
        case 'r' -> '\r';
        case 't' -> '\t';
        default -> -1;
      };
      if (ch >= 0) emit(c, s, ch, out);
      else if (b == 'u' && hexPartial(s, 0, 0)) out.add(c.replace(new Str(node, s.len(), 2, 0, 0, 0, 0, s.dfa())));
      return;
    }
    if (s.esc() >= 2) {
      int h = Character.digit(b, 16);
      if (h < 0) return;
      int cp = s.cp() << 4 | h;
      int digits = s.esc() - 1;
      if (digits == 4) {
        if (cp < 0xd800 || cp > 0xdfff) emit(c, s, cp, out);
      } else if (hexPartial(s, cp, digits)) {
        out.add(c.replace(new Str(node, s.len(), s.esc() + 1, 0, cp, 0, 0, s.dfa())));
      }
      return;
    }
    if (b == '"') {
      if (s.len() >= node.minLength && (node.pattern == null || node.pattern.isAccept(s.dfa()))) out.add(done(c.rest));
    } else if (b == '\\') {
      if (partialRange(s, 0, 0xffff)) out.add(c.replace(new Str(node, s.len(), 1, 0, 0, 0, 0, s.dfa())));
    } else if (b < 0x20) {
      return; // control characters must be escaped
    } else if (b < 0x80) {
      emit(c, s, b, out);
    } else if (b >= 0xc2 && b <= 0xdf) {
      lead(c, s, b & 0x1f, 1, 0x80, 0xbf, 0x80, 0x7ff, out);
    } else if (b >= 0xe0 && b <= 0xef) {
      lead(c, s, b & 0x0f, 2, b == 0xe0 ? 0xa0 : 0x80, b == 0xed ? 0x9f : 0xbf, b == 0xe0 ? 0x800 : 0, b == 0xed ? 0xd7ff : 0xffff, out);
    } else if (b >= 0xf0 && b <= 0xf4) {
      lead(c, s, b & 0x07, 3, b == 0xf0 ? 0x90 : 0x80, b == 0xf4 ? 0x8f : 0xbf, 0x10000, 0x10ffff, out);
    }
  }

  /** A UTF-8 lead byte: bits so far, continuation bytes needed, the next byte's range, the code point's range. */
  private void lead(Config c, Str s, int bits, int need, int lo, int hi, int cpMin, int cpMax, Collection<Config> out) {
    int span = (1 << 6 * need) - 1;
    int from = Math.max(cpMin, bits << 6 * need), to = Math.min(cpMax, bits << 6 * need | span);
    if (from > to || !partialRange(s, from, to)) return;
    out.add(c.replace(new Str(s.node(), s.len(), 0, need, bits, lo, hi, s.dfa())));
  }

  /** After a continuation byte: the code point is cp followed by {@code need} more 6-bit groups. */
  private boolean partial(Str s, int cp, int need) {
    int span = (1 << 6 * need) - 1;
    return partialRange(s, cp << 6 * need, Math.min(0x10ffff, cp << 6 * need | span));
  }

  /** Within a \\u escape after {@code digits} hex digits (value cp so far). */
  private boolean hexPartial(Str s, int cp, int digits) {
    int rest = 4 - digits;
    int from = cp << 4 * rest, to = from | (1 << 4 * rest) - 1;
    if (from >= 0xd800 && to <= 0xdfff) return false; // surrogates only
    return partialRange(s, from, to);
  }

  /** Whether some code point in [from, to] can come next and the string still be completed. */
  private boolean partialRange(Str s, int from, int to) {
    StringNode node = s.node();
    if (node.countsLength() && s.len() + 1 > node.maxLength) return false;
    if (node.pattern == null) return true;
    for (char probe : PatternReach.probes(node.pattern, from, Math.min(to, 0xffff))) {
      int t = node.pattern.step(s.dfa(), probe);
      if (t >= 0 && node.reach.canFinish(t, s.len() + 1)) return true;
    }
    return false;
  }

  /** The string takes code point cp. */
  private void emit(Config c, Str s, int cp, Collection<Config> out) {
    StringNode node = s.node();
    int len = s.len();
    int dfa = s.dfa();
    if (node.countsLength()) {
      len++;
      if (len > node.maxLength) return;
      if (node.pattern == null && node.maxLength == Integer.MAX_VALUE) len = Math.min(len, node.minLength); // past it, all alike
    }
    if (node.pattern != null) {
      if (cp > 0xffff) return;
      dfa = node.pattern.step(dfa, (char) cp);
      if (!node.reach.canFinish(dfa, len)) return;
    }
    out.add(c.replace(new Str(node, len, 0, 0, 0, 0, 0, dfa)));
  }

  private void number(Config c, Num n, int b, Collection<Config> out) {
    if (b == '-' || b == '.' || b >= '0' && b <= '9') {
      String t = n.text() + (char) b;
      if (NumberText.live(n.node(), t)) out.add(c.replace(new Num(n.node(), t)));
    }
    if (NumberText.complete(n.node(), n.text())) step(done(c.rest), b, out);
  }

  private void literal(Config c, Lit l, int b, Collection<Config> out) {
    LiteralNode node = l.node();
    byte[] cur = node.literals.get(l.cand());
    int off = l.off();
    if (b != END) {
      for (int p = l.cand(); p < node.literals.size(); p++) {
        byte[] lit = node.literals.get(p);
        if (!samePrefix(lit, cur, Math.min(off, lit.length)) || lit.length < off) break; // sorted: candidates are contiguous
        if (lit.length > off && (lit[off] & 0xff) == b) {
          out.add(c.replace(new Lit(node, p, off + 1)));
          break;
        }
      }
    }
    if (cur.length == off) step(done(c.rest), b, out);
  }
}
