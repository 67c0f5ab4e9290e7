package io.longsieve.cuda.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** How flash decoding splits a key range over blocks (host side only: runs without a GPU). */
class SplitPlanTest {

  @ParameterizedTest(name = "rows={0} keys={1} group={2} nKv={3}")
  @CsvSource({"1, 1, 4, 8", "1, 8192, 4, 8", "1, 131072, 4, 8", "1, 131072, 8, 1", "96, 300, 2, 2", "1, 5000, 7, 4"})
  void plansCoverEveryKeyInPageMultiples(int rows, int keys, int group, int nKv) {
    for (Kernels.SplitPlan p : new Kernels.SplitPlan[] {Kernels.splitPlan(rows, keys, group, nKv, 132),
        Kernels.decodePlan(rows, keys, nKv, 132)}) {
      assertEquals(0, p.chunk() % 64, "chunks are whole pages");
      assertTrue((long) p.chunk() * p.splits() >= keys, "every key is in a split");
      assertTrue((long) p.chunk() * (p.splits() - 1) < keys, "no split is empty at the full length");
    }
    // the CUDA-core kernel keeps its scores in at most 40 KB of shared memory
    Kernels.SplitPlan s = Kernels.splitPlan(rows, keys, group, nKv, 132);
    assertTrue(4L * group * s.chunk() <= 40 * 1024, "scores fit shared memory");
  }

  @ParameterizedTest
  @CsvSource({"131072, 8", "8192, 8", "65536, 4"})
  void longDecodesSpreadOverSeveralBlocksPerMultiprocessor(int keys, int nKv) {
    Kernels.SplitPlan p = Kernels.decodePlan(1, keys, nKv, 132);
    assertTrue(p.splits() * nKv >= 132, "at least one block per multiprocessor: " + p);
  }

  /** attn_combine indexes its threads by AC_THREADS: the launch must use exactly that many per block. */
  @Test
  void combineThreadsMatchTheKernel() throws IOException {
    assertEquals(Kernels.COMBINE_THREADS, KernelDefines.of("decode/split_attention.cu", "AC_THREADS"));
  }
}
