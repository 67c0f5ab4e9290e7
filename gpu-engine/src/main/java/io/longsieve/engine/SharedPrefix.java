package io.longsieve.engine;

import java.io.Serializable;

/**
 * A caller's word that the first {@code tokens} prompt tokens of a request are shared with other
 * requests (several questions over one document), so the engine may keep their KV cache after the
 * first of them computes it and start the others from a copy (prefix reuse, docs/prefix-reuse.md).
 * The engine checks the token ids themselves: a wrong count costs reuse, never a wrong answer; and
 * it reuses only as far as the request's policy allows ({@link io.longsieve.policy.PrefixReuse}).
 *
 * @param tokens leading prompt tokens shared; 0: none (the request runs as without this)
 * @param scope  who kept the prefix (e.g. one Spark task), for {@link Engine#releasePrefixes}
 */
public record SharedPrefix(int tokens, String scope) implements Serializable {

  /** Nothing shared. */
  public static final SharedPrefix NONE = new SharedPrefix(0, "");

  public SharedPrefix {
    if (tokens < 0) throw new IllegalArgumentException("shared tokens must be >= 0, not " + tokens);
    if (scope == null) scope = "";
  }
}
