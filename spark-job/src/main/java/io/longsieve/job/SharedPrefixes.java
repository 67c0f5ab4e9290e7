package io.longsieve.job;

import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

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
}
