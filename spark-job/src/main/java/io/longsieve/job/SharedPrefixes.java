package io.longsieve.job;

import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.function.Function;
import org.apache.spark.sql.Row;

/**
 * Which rows share a long prompt prefix (several questions over one document), for prefix reuse
 * (docs/prefix-reuse.md): the driver places each group in one partition, the executor tells its engine
 * how many prompt tokens a row shares with its neighbours, the engine computes their KV cache once.
 *
 * <p>The driver's stand-in for the rendered prompt's token ids is a key: the SHA-256 of the system
 * message, the raw flag and the prompt text before the first per-row placeholder
 * ({@link PromptTemplate#sharedHead}: the instruction and the document(s), not the question). It is
 * computed where the rows are, without a tokenizer (the driver loads no model), reading each text once;
 * equal keys mean equal chat-templated prefixes, so the grouping is right for every model. It can only
 * group too much (a template that differs after the head): the engine compares the token ids themselves
 * before it reuses anything, so a wrong group costs reuse, never an answer.
 */
final class SharedPrefixes {
  private SharedPrefixes() {}

  /** A row's shared head: its key, and its length in characters (what the cost model estimates tokens from). */
  record Head(String key, long chars) implements Serializable {}

  /**
   * The head of a row whose shared text is {@code head}, or null when it is shorter than
   * {@code minChars} (too short to be worth keeping rows together for).
   */
  static Head of(String system, boolean raw, String head, long minChars) {
    if (head.length() < Math.max(1, minChars)) return null;
    try {
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      // lengths first, so no two different (system, head) pairs hash the same bytes
      String sys = system == null ? "" : system;
      md.update((sys.length() + ":" + (system == null ? "-" : "+") + (raw ? "raw:" : "chat:")).getBytes(StandardCharsets.UTF_8));
      md.update(sys.getBytes(StandardCharsets.UTF_8));
      md.update(head.getBytes(StandardCharsets.UTF_8));
      return new Head(HexFormat.of().formatHex(md.digest(), 0, 16), head.length());
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JVM has SHA-256", e);
    }
  }

  /**
   * How many leading tokens of {@code prompt} the head's own prompt ({@code headPrompt}: the same
   * request with only the head as its text) has too: the prompt's shared prefix in tokens, whatever the
   * chat template adds around the text. A token that spans the head's end (BPE merges the question's
   * first characters into it) is left out, as the two prompts part there.
   */
  static int sharedTokens(int[] prompt, int[] headPrompt) {
    int n = Math.min(prompt.length, headPrompt.length), i = 0;
    while (i < n && prompt[i] == headPrompt[i]) i++;
    return i;
  }
  /**
   * A partition's prefix reuse on the executor: the scope its engine keeps prefixes under (released when
   * the partition ends, if a shared row {@link #reachedEngine}) and the last head's prompt ids, computed
   * once per group.
   */
  static final class Partition {
    final String scope;
    boolean reachedEngine;
    private String headText;
    private int[] headIds;

    Partition(String scope) {
      this.scope = scope;
    }

    /** {@link SharedPrefixes#sharedTokens} of the prompt and the head's own prompt ({@code headPrompt} makes it). */
    int sharedTokens(int[] prompt, String head, Function<String, int[]> headPrompt) {
      if (!head.equals(headText)) {
        headIds = headPrompt.apply(head);
        headText = head;
      }
      return SharedPrefixes.sharedTokens(prompt, headIds);
    }
  }

  /**
   * A partition's rows, each with whether it shares its head with the row before or after it (the plan
   * sorted a group's rows together): reads one row ahead, and only for a row that has a head.
   */
  static final class Neighbours implements Iterator<Row> {
    private final Iterator<Row> rows;
    private final Function<Row, Head> heads;
    private Row ahead;        // the next row, read to see whether it shares the current one's head
    private Head aheadHead;
    private String lastKey;   // the head key of the row before
    private boolean shares;

    Neighbours(Iterator<Row> rows, Function<Row, Head> heads) {
      this.rows = rows;
      this.heads = heads;
    }

    @Override
    public boolean hasNext() {
      return ahead != null || rows.hasNext();
    }

    @Override
    public Row next() {
      Row in = ahead != null ? ahead : rows.next();
      Head head = ahead != null ? aheadHead : heads.apply(in);
      ahead = null;
      String next = null;
      if (head != null && rows.hasNext()) {
        ahead = rows.next();
        aheadHead = heads.apply(ahead);
        next = aheadHead == null ? null : aheadHead.key();
      }
      String key = head == null ? null : head.key();
      shares = key != null && (key.equals(lastKey) || key.equals(next));
      lastKey = key;
      return in;
    }

    /** Whether the row {@link #next} returned last shares its head with a neighbour. */
    boolean shares() {
      return shares;
    }
  }
}
