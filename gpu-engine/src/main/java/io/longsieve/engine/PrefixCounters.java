package io.longsieve.engine;

import java.io.Serializable;

/**
 * What an engine's cache of kept prompt prefixes has done since it opened (prefix reuse).
 *
 * @param kept        prefixes kept after the request that computed them
 * @param forks       requests that started from a kept prefix
 * @param reusedTokens prompt tokens those requests took from it instead of prefilling them
 * @param evicted     prefixes dropped to make room (least recently used first)
 * @param refused     prefixes not kept because they alone did not fit the budget
 * @param released    prefixes dropped because their scope ended ({@link Engine#releasePrefixes})
 * @param heldBytes   bytes the kept prefixes hold now
 * @param peakBytes   most bytes they held at once
 * @param budgetBytes the budget; 0: prefix reuse is off
 */
public record PrefixCounters(long kept, long forks, long reusedTokens, long evicted, long refused, long released,
    long heldBytes, long peakBytes, long budgetBytes) implements Serializable {

  /** An engine that keeps no prefixes. */
  public static final PrefixCounters NONE = new PrefixCounters(0, 0, 0, 0, 0, 0, 0, 0, 0);
}
