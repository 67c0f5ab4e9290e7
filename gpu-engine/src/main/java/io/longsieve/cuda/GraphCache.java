package io.longsieve.cuda;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Consumer;

/**
 * Captured step graphs by key (cuda/DecodeStep's policy): a key's graph is made the second time
 * the key comes, since a key seen once may never come again and a capture costs about as much as
 * the step; at most {@code capacity} graphs are kept, the least recently used closed first; keys
 * seen once are remembered among the last {@code 4 × capacity} (the groups of one batch alternate
 * keys step by step). Keys must not change once given. Not thread-safe.
 */
final class GraphCache<K, G> {

  private final int capacity;
  private final Consumer<G> close;
  private final Map<K, G> graphs;
  private final Map<K, Boolean> seenOnce;

  GraphCache(int capacity, Consumer<G> close) {
    this.capacity = capacity;
    this.close = close;
    this.graphs = new LinkedHashMap<>(16, 0.75f, true) {
      @Override
      protected boolean removeEldestEntry(Map.Entry<K, G> eldest) {
        if (size() <= GraphCache.this.capacity) return false;
        GraphCache.this.close.accept(eldest.getValue());
        return true;
      }
    };
    this.seenOnce = new LinkedHashMap<>(16, 0.75f, true) {
      @Override
      protected boolean removeEldestEntry(Map.Entry<K, Boolean> eldest) {
        return size() > 4 * GraphCache.this.capacity;
      }
    };
  }

  /** The graph of key (now the most recently used), or null. */
  G get(K key) {
    return graphs.get(key);
  }

  /**
   * Called after a step of key ran without a graph: true when the key came before (capture it
   * now and {@link #put} the graph), false when this is its first time (remembered).
   */
  boolean cameBefore(K key) {
    if (seenOnce.remove(key) != null) return true;
    seenOnce.put(key, Boolean.TRUE);
    return false;
  }

  void put(K key, G graph) {
    G old = graphs.put(key, graph);
    if (old != null && old != graph) close.accept(old);
  }

  int size() {
    return graphs.size();
  }

  /** Closes every graph and forgets every key. */
  void clear() {
    graphs.values().forEach(close);
    graphs.clear();
    seenOnce.clear();
  }
}
