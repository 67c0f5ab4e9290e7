package io.longsieve.structured;

import dk.brics.automaton.RunAutomaton;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * What a pattern's DFA state can still become: whether an accepting state is reachable at all and,
 * when the string's length is bounded, in how many more characters ({@link #canFinish}). The matcher
 * asks this after every character so that a string under a pattern and a length bound never enters a
 * state from which no allowed string can be completed.
 */
final class PatternReach {

  /** Largest table (states x lengths, in bits) a pattern with length bounds may need. */
  static final long MAX_TABLE_BITS = 64L << 20;

  private final int minLength;
  private final int maxLength;   // Integer.MAX_VALUE: none
  private final int horizon;     // lengths tabled: 0 .. horizon
  private final boolean[] live;  // (states) an accepting state is reachable
  private final BitSet[] steps;  // (states) bit k: an accepting state exactly k characters away; null: no bound

  PatternReach(RunAutomaton a, int minLength, int maxLength) {
    this.minLength = minLength;
    this.maxLength = maxLength;
    int n = a.getSize();
    int[][] succ = successors(a);
    live = new boolean[n];
    boolean changed = true;
    for (int s = 0; s < n; s++) live[s] = a.isAccept(s);
    while (changed) {
      changed = false;
      for (int s = 0; s < n; s++) {
        if (live[s]) continue;
        for (int t : succ[s]) {
          if (live[t]) {
            live[s] = true;
            changed = true;
            break;
          }
        }
      }
    }
    if (minLength == 0 && maxLength == Integer.MAX_VALUE) {
      horizon = 0;
      steps = null;
      return;
    }
    // a path longer than minLength + n has a cycle it can drop and stay >= minLength
    horizon = maxLength != Integer.MAX_VALUE ? maxLength : minLength + n;
    if ((long) n * (horizon + 1) > MAX_TABLE_BITS) {
      throw new SchemaException("maxLength", null, "a pattern's DFA of " + n + " states with lengths up to " + horizon
          + " is too large to plan; lower maxLength or simplify the pattern");
    }
    steps = new BitSet[n];
    for (int s = 0; s < n; s++) steps[s] = new BitSet(horizon + 1);
    boolean[] cur = new boolean[n];
    for (int s = 0; s < n; s++) cur[s] = a.isAccept(s);
    for (int k = 0; k <= horizon; k++) {
      boolean[] prev = new boolean[n];
      boolean any = false;
      for (int s = 0; s < n; s++) {
        if (cur[s]) steps[s].set(k);
        for (int t : succ[s]) {
          if (cur[t]) {
            prev[s] = true;
            any = true;
            break;
          }
        }
      }
      if (!any) break;
      cur = prev;
    }
  }

  /** Whether from {@code state}, after {@code length} characters, an accepted string within the length bounds exists. */
  boolean canFinish(int state, int length) {
    if (state < 0 || !live[state]) return false;
    if (steps == null) return true;
    if (length > maxLength) return false;
    int lo = Math.max(0, minLength - length);
    int hi = maxLength != Integer.MAX_VALUE ? maxLength - length : Math.min(horizon, lo + horizon);
    if (lo > horizon) return false;
    int k = steps[state].nextSetBit(lo);
    return k >= 0 && k <= hi;
  }

  /** Per state, the distinct states one character of the alphabet leads to. */
  private static int[][] successors(RunAutomaton a) {
    char[] points = a.getCharIntervals();
    int[][] out = new int[a.getSize()][];
    for (int s = 0; s < a.getSize(); s++) {
      Set<Integer> next = new LinkedHashSet<>();
      for (char c : points) {
        if (Character.isSurrogate(c)) continue; // the alphabet has none (EcmaPattern intersects them away)
        int t = a.step(s, c);
        if (t >= 0) next.add(t);
      }
      out[s] = next.stream().mapToInt(Integer::intValue).toArray();
    }
    return out;
  }

  /** Characters that start the DFA's transition intervals: one probe per interval is enough. */
  static List<Character> probes(RunAutomaton a, int lo, int hi) {
    List<Character> out = new ArrayList<>();
    if (lo <= hi && !(lo >= 0xD800 && lo <= 0xDFFF)) out.add((char) lo);
    for (char c : a.getCharIntervals()) if (c > lo && c <= hi && !Character.isSurrogate(c)) out.add(c);
    return out;
  }
}
