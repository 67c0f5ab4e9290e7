package io.longsieve.engine;

import io.longsieve.engine.spi.ModelRunner;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The prompt prefixes an engine keeps for reuse (docs/prefix-reuse.md): each one the KV cache of the
 * first L tokens of a prompt, as the request that computed them left it, under a byte budget. A kept
 * prefix is found by its {@link Key}, the policy state it was computed under and its exact token ids,
 * so a request never starts from another prompt's cache. An entry is pending while the request that
 * computes it prefills ({@link #produce}), ready once {@link #keep} stored it; the least recently used
 * ready entries go first when a new one needs room, and {@link #release} drops a scope's entries.
 * Forks hold what they need on their own (a copy on the CPU, page references on the GPU), so dropping
 * an entry never touches a running request.
 *
 * <p>Failure semantics: a prefix larger than the whole budget is not kept ({@link #keep} returns false
 * and closes it). Only the scheduler thread changes the cache (a backend's prefixes are closed on the
 * thread that drives it); {@link #counters} may be read from any thread.
 */
final class PrefixCache {

  private static final Logger LOG = Logger.getLogger(PrefixCache.class.getName());

  /** Which prefix: the policy state it needs ({@code PrefixReuse.stateKey}) and its token ids. */
  static final class Key {
    final String state;
    private final int[] ids;
    private final int hash;

    Key(String state, int[] ids) {
      this.state = state;
      this.ids = ids;
      this.hash = 31 * state.hashCode() + Arrays.hashCode(ids);
    }

    int tokens() {
      return ids.length;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Key k && k.hash == hash && k.state.equals(state) && Arrays.equals(k.ids, ids);
    }

    @Override
    public int hashCode() {
      return hash;
    }
  }

  /** One prefix: pending (prefix null) while a request computes it, then ready. */
  static final class Entry {
    final Key key;
    final String scope;
    private ModelRunner.KeptPrefix prefix;

    private Entry(Key key, String scope) {
      this.key = key;
      this.scope = scope;
    }

    boolean ready() {
      return prefix != null;
    }

    ModelRunner.KeptPrefix prefix() {
      return prefix;
    }
  }

  private final long budget;
  private final LinkedHashMap<Key, Entry> entries = new LinkedHashMap<>(16, 0.75f, true); // least recently used first
  private long held, peak, kept, forks, reusedTokens, evicted, refused, released;

  /** @param budgetBytes what kept prefixes may hold together, > 0 */
  PrefixCache(long budgetBytes) {
    if (budgetBytes <= 0) throw new IllegalArgumentException("a prefix cache needs a budget > 0");
    this.budget = budgetBytes;
  }

  long budget() {
    return budget;
  }

  /** The entry for key, pending or ready, or null; counts as a use. */
  synchronized Entry get(Key key) {
    return entries.get(key);
  }

  /** A pending entry for key, whose request is about to compute it. */
  synchronized Entry produce(Key key, String scope) {
    Entry e = new Entry(key, scope);
    entries.put(key, e);
    return e;
  }

  /**
   * Stores the computed prefix in its pending entry, after dropping the least recently used ready
   * entries it needs room for. False when it does not fit even then: the prefix is closed and the
   * entry gone (its waiters compute it again, or run without it).
   */
  synchronized boolean keep(Entry e, ModelRunner.KeptPrefix prefix) {
    if (entries.get(e.key) != e) {  // released or replaced while it was computed
      prefix.close();
      return false;
    }
    long bytes = prefix.bytes();
    if (bytes > budget) {
      entries.remove(e.key);
      prefix.close();
      refused++;
      return false;
    }
    for (Iterator<Entry> it = entries.values().iterator(); it.hasNext() && held + bytes > budget; ) {
      Entry old = it.next();
      if (!old.ready()) continue;
      it.remove();
      drop(old);
      evicted++;
    }
    e.prefix = prefix;
    held += bytes;
    peak = Math.max(peak, held);
    kept++;
    return true;
  }

  /** The request computing e failed or left before keeping it: e goes (its waiters compute it again). */
  synchronized void abandon(Entry e) {
    if (entries.get(e.key) == e) entries.remove(e.key);
  }

  /** Counts one request that started from a kept prefix. */
  synchronized void forked(Entry e) {
    forks++;
    reusedTokens += e.key.tokens();
  }

  /** Drops the ready entries kept under scope (the partition that kept them ended). */
  void release(String scope) {
    List<Entry> gone = new ArrayList<>();
    synchronized (this) {
      for (Iterator<Entry> it = entries.values().iterator(); it.hasNext(); ) {
        Entry e = it.next();
        if (e.ready() && e.scope.equals(scope)) {
          it.remove();
          gone.add(e);
        }
      }
      released += gone.size();
    }
    for (Entry e : gone) drop(e);
  }

  /** Drops every entry (the engine closes). */
  void closeAll() {
    List<Entry> all;
    synchronized (this) {
      all = new ArrayList<>(entries.values());
      entries.clear();
    }
    for (Entry e : all) if (e.ready()) drop(e);
  }

  private void drop(Entry e) {
    ModelRunner.KeptPrefix p = e.prefix;
    synchronized (this) {
      held -= p.bytes();
    }
    try {
      p.close();
    } catch (RuntimeException ex) {
      LOG.log(Level.WARNING, "closing a kept prefix failed", ex);
    }
  }

  synchronized PrefixCounters counters() {
    return new PrefixCounters(kept, forks, reusedTokens, evicted, refused, released, held, peak, budget);
  }
}
