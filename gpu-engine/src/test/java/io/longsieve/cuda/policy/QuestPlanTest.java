package io.longsieve.cuda.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cuda.kernels.QuestKernels;
import org.junit.jupiter.api.Test;

/** Host-side sizes of GPU Quest: the dense/sparse decision, list lengths and the attention split plan. */
class QuestPlanTest {

  @Test
  void denseWhileTheFullPagesFitTheBudget() {
    // budget 2048, page 16: 128 top pages; 127 full pages + the newest fit, 128 full pages do not
    int top = Math.max(3, 2048 / 16);
    assertTrue(GpuQuest.dense(5, 2, top, 127));
    assertFalse(GpuQuest.dense(5, 2, top, 128));
    assertTrue(GpuQuest.dense(1, 2, top, 10_000), "dense layers");
    assertFalse(GpuQuest.dense(2, 2, top, 10_000));
    assertTrue(GpuQuest.dense(0, 0, 3, 2), "at least 3 pages");
  }

  @Test
  void listIsPickedPagesPlusTheNewestPartialPage() {
    // 100 slots, page 8: 12 full pages (96 slots), the newest page holds slots 96..99
    assertEquals(3 * 8 + 4, GpuQuest.listLength(100, 8, 3));
    // a just-filled page is still the newest one: 96 slots = 11 full pages + 8 in the last
    assertEquals(3 * 8 + 8, GpuQuest.listLength(96, 8, 3));
    assertEquals(3 * 8 + 1, GpuQuest.listLength(97, 8, 3));
  }

  @Test
  void planCoversTheListWithBoundedChunks() {
    for (int len : new int[] {1, 25, 64, 65, 2047, 2048 + 16, 100_000}) {
      for (int heads : new int[] {4, 32, 64}) {
        QuestKernels.Plan p = QuestKernels.plan(len, heads, 132);
        assertTrue(p.chunk() >= 64 && p.chunk() <= QuestKernels.MAX_CHUNK && p.chunk() % 32 == 0, p + " for " + len);
        assertTrue((long) p.chunk() * p.splits() >= len && (long) p.chunk() * (p.splits() - 1) < len, p + " for " + len);
        // the attention block's scores and entry offsets fit the default 48 KB at the largest head size
        assertTrue(QuestKernels.attendSmem(256, p.chunk()) <= 48 * 1024, p + " for " + len);
      }
    }
    // Llama-3.1-8B at budget 2048, page 16: 127 pages + tail over 32 heads → about 4 blocks per SM
    QuestKernels.Plan p = QuestKernels.plan(127 * 16 + 16, 32, 132);
    int blocks = p.splits() * 32;
    assertTrue(blocks >= 3 * 132 && blocks <= 5 * 132, p.toString());
    assertEquals((long) 32 * p.splits() * 130, p.partialFloats(32, 128));
  }

  @Test
  void headDimsOffTheMergesFourWideStepsAreRefused() {
    assertThrows(IllegalArgumentException.class, () -> QuestKernels.checkHeadDim(7));
    assertThrows(IllegalArgumentException.class, () -> QuestKernels.checkHeadDim(6));
    assertThrows(IllegalArgumentException.class, () -> QuestKernels.checkHeadDim(512));
    QuestKernels.checkHeadDim(16);
  }
}
