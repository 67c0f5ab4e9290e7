package io.longsieve.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** How decode steps decide to capture and keep graphs (GraphCache), with strings for graphs: no GPU. */
class GraphCacheTest {

  private final List<String> closed = new ArrayList<>();
  private final GraphCache<String, String> cache = new GraphCache<>(2, closed::add);

  @Test
  void aKeyIsCapturedTheSecondTimeItComes() {
    assertNull(cache.get("a"));
    assertFalse(cache.cameBefore("a"), "first time: run eagerly, remember");
    assertTrue(cache.cameBefore("a"), "second time: capture");
    cache.put("a", "graph a");
    assertEquals("graph a", cache.get("a"));
  }

  @Test
  void keysThatAlternateAreCapturedToo() {
    // two groups of one batch: keys a, b, a, b ...
    assertFalse(cache.cameBefore("a"));
    assertFalse(cache.cameBefore("b"));
    assertTrue(cache.cameBefore("a"));
    assertTrue(cache.cameBefore("b"));
  }

  @Test
  void theLeastRecentlyUsedGraphIsClosedBeyondTheCapacity() {
    cache.put("a", "graph a");
    cache.put("b", "graph b");
    cache.get("a");  // b is now the least recently used
    cache.put("c", "graph c");
    assertEquals(List.of("graph b"), closed);
    assertNull(cache.get("b"));
    assertEquals(2, cache.size());
  }

  @Test
  void keysSeenOnceAreForgottenBeyondFourTimesTheCapacity() {
    assertFalse(cache.cameBefore("k0"));
    for (int i = 1; i <= 8; i++) assertFalse(cache.cameBefore("k" + i));
    assertFalse(cache.cameBefore("k0"), "k0 fell out of the 8 remembered keys");
  }

  @Test
  void clearClosesEveryGraphAndForgetsEveryKey() {
    cache.put("a", "graph a");
    cache.put("b", "graph b");
    cache.cameBefore("c");
    cache.clear();
    assertEquals(List.of("graph a", "graph b"), closed);
    assertEquals(0, cache.size());
    assertFalse(cache.cameBefore("c"));
  }

  @Test
  void replacingAGraphClosesTheOldOne() {
    cache.put("a", "graph a");
    cache.put("a", "graph a2");
    assertEquals(List.of("graph a"), closed);
    assertEquals("graph a2", cache.get("a"));
  }
}
