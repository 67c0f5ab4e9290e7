package io.longsieve.cuda.kv;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.engine.OutOfMemory;
import org.junit.jupiter.api.Test;

/** The page pool's host bookkeeping for shared pages (prefix reuse), on the CPU. */
class PageHoldersTest {

  @Test
  void aSharedPageIsFreedByItsLastHolder() {
    KvPagePool.FreeList f = new KvPagePool.FreeList(3);
    int p = f.take();
    f.retain(p);  // a kept prefix
    f.retain(p);  // a fork
    assertEquals(3, f.holders(p));
    f.give(p);
    f.give(p);
    assertEquals(2, f.free());    // still held once
    f.give(p);
    assertEquals(3, f.free());
    assertEquals(0, f.holders(p));
    assertThrows(IllegalArgumentException.class, () -> f.give(p));
    assertThrows(IllegalArgumentException.class, () -> f.retain(p));
  }

  @Test
  void anEmptyPoolReadsAsOutOfMemorySoTheEngineDefersTheRequest() {
    KvPagePool.FreeList f = new KvPagePool.FreeList(1);
    f.take();
    IllegalStateException e = assertThrows(IllegalStateException.class, f::take);
    assertTrue(OutOfMemory.causedBy(e), e.getMessage());
  }
}
