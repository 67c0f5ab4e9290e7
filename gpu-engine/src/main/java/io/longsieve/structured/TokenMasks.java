package io.longsieve.structured;

import java.util.HashMap;
import java.util.Map;

/**
 * The allowed-token masks of one schema over one vocabulary, cached per matcher state. A state's
 * mask is computed once, walking the vocabulary in byte order as a trie: the state after a shared
 * prefix is reused by every token that has it, and a dead prefix skips every token below it. A
 * token is allowed when all its bytes keep the output a prefix of some valid document; an
 * end-of-sequence id when the output is already a whole one. The state a picked token leads to is
 * remembered on the entry, so a warm step is two map look-ups.
 *
 * <p>Thread-safe (the engine compiles on request threads and steps on its scheduler thread). The cache
 * holds at most {@link #MAX_ENTRIES} states; past that it starts over (entries in use stay valid).
 */
public final class TokenMasks {

  static final int MAX_ENTRIES = 8192;

  private final JsonMatcher matcher;
  private final TokenVocabulary vocab;
  private final Map<MatchState, Entry> entries = new HashMap<>();
  private final Entry start;
  private long computed; // masks computed (cache misses), for benchmarks
  private long computeNanos;

  TokenMasks(JsonMatcher matcher, TokenVocabulary vocab) {
    this.matcher = matcher;
    this.vocab = vocab;
    this.start = intern(matcher.start());
  }

  /** One cached state: its mask (computed on first use) and where picked tokens lead. */
  public final class Entry {
    private final MatchState state;
    private long[] allowed;        // (ceil(vocab / 64)) bit i: token i allowed
    private boolean accepting;     // a whole document: EOS allowed
    private boolean complete;      // a whole document that no byte can extend: generation ends here
    private final Map<Integer, Entry> next = new HashMap<>();

    private Entry(MatchState state) {
      this.state = state;
    }
  }

  Entry start() {
    return start;
  }

  TokenVocabulary vocabulary() {
    return vocab;
  }

  /** The mask of {@code e}: bit i set when token i may come next. Do not modify. */
  synchronized long[] allowed(Entry e) {
    if (e.allowed == null) compute(e);
    return e.allowed;
  }

  synchronized boolean complete(Entry e) {
    if (e.allowed == null) compute(e);
    return e.complete;
  }

  synchronized boolean accepting(Entry e) {
    if (e.allowed == null) compute(e);
    return e.accepting;
  }

  /**
   * The entry after token {@code id}.
   *
   * @throws IllegalStateException when the token is not allowed in {@code e} (the sampler ignored the mask)
   */
  synchronized Entry advance(Entry e, int id) {
    Entry n = e.next.get(id);
    if (n != null) return n;
    byte[] b = vocab.bytes(id);
    MatchState s = b == null ? null : matcher.step(e.state, b);
    if (s == null) throw new IllegalStateException("token " + id + " is not allowed here by the JSON schema");
    n = intern(s);
    e.next.put(id, n);
    return n;
  }

  /** Masks computed so far, and the time they took (ms). */
  public synchronized long computed() {
    return computed;
  }

  public synchronized double computeMs() {
    return computeNanos / 1e6;
  }

  private Entry intern(MatchState s) {
    Entry e = entries.get(s);
    if (e == null) {
      if (entries.size() >= MAX_ENTRIES) entries.clear();
      e = new Entry(s);
      entries.put(s, e);
    }
    return e;
  }

  private void compute(Entry e) {
    long t0 = System.nanoTime();
    int[] order = vocab.sorted(), lcp = vocab.lcp();
    long[] mask = new long[(vocab.size() + 63) >>> 6];
    MatchState[] at = new MatchState[64]; // at[d]: the state after the current token's first d bytes
    at[0] = e.state;
    int valid = 0;      // at[0..valid] hold for the current token's prefix
    int deadFrom = -1;  // the previous token died after its first deadFrom bytes: skip those sharing them
    boolean any = false;
    for (int i = 0; i < order.length; i++) {
      int id = order[i];
      byte[] t = vocab.bytes(id);
      if (deadFrom >= 0 && lcp[i] >= deadFrom) continue; // shares the dead prefix (sorted: they come together)
      deadFrom = -1;
      int d = Math.min(lcp[i], valid);
      if (t.length >= at.length) at = java.util.Arrays.copyOf(at, t.length + 1);
      MatchState s = at[d];
      while (d < t.length) {
        s = matcher.step(s, t[d] & 0xff);
        if (s == null) break;
        at[++d] = s;
      }
      valid = d;
      if (s == null) {
        deadFrom = d + 1;
        continue;
      }
      mask[id >>> 6] |= 1L << id;
      any = true;
    }
    e.accepting = matcher.accepts(e.state);
    if (e.accepting) for (int id : vocab.eos()) if (id >= 0 && id < vocab.size()) mask[id >>> 6] |= 1L << id;
    e.complete = e.accepting && !any;
    e.allowed = mask;
    computed++;
    computeNanos += System.nanoTime() - t0;
  }
}
