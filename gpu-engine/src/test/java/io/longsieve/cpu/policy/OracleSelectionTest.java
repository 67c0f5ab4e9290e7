package io.longsieve.cpu.policy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cpu.kernels.AttendedKeys;
import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.policy.PolicySpec;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/**
 * The oracle selector attends, per query row and head, exactly the top-k slots by the true attention
 * logits (fp64 brute force over every visible slot), and its output is attention over those slots.
 * The slots come from the cache's {@link AttendedKeys}, the same report attention recall reads.
 */
class OracleSelectionTest {

  /** Slots each row-head attended, as the kernels report them. */
  static final class Captured implements AttendedKeys {
    final Map<Integer, int[]> byRowHead = new ConcurrentHashMap<>();

    @Override
    public void attended(int layer, int rowHead, int[] slots, int off, int count) {
      byRowHead.put(rowHead, Arrays.copyOfRange(slots, off, off + count));
    }

    @Override
    public void attendedRange(int layer, int rowHead, int from, int to) {
      byRowHead.put(rowHead, IntStream.range(from, to).toArray());
    }
  }

  /** The k visible slots with the largest fp64 logit q·k/√d (no ties with random data), ascending. */
  static int[] bruteTopK(Fixture f, KvCache kv, int layer, float[] q, int qOff, int qpos, int kvh, int visible, int k) {
    int d = f.c.headDim();
    float[] qr = f.rotated(q, qOff, qpos);
    double[] s = new double[visible];
    for (int j = 0; j < visible; j++) {
      float[] key = f.rotated(kv.keys[layer], j * f.c.kvDim() + kvh * d, j);
      for (int e = 0; e < d; e++) s[j] += (double) qr[e] * key[e];
    }
    return IntStream.range(0, visible).boxed().sorted(Comparator.comparingDouble(j -> -s[j])).limit(k)
        .mapToInt(Integer::intValue).sorted().toArray();
  }

  @Test
  void prefillRowsAttendTheirTopKByTrueAttention() {
    try (Fixture f = new Fixture(11)) {
      int n = 90, m = 30, layer = 1, k = 7, heads = f.c.numHeads(), d = f.c.headDim();
      KvCache kv = f.cache(n, n);
      Captured cap = new Captured();
      kv.attended = cap;
      float[] q = f.rand(m * f.c.qDim()), out = new float[m * f.c.qDim()];
      ComposedPolicy.of(PolicySpec.parse("oracle:k=" + k)).prefill(layer, q, m, n - m, kv, out, f.ctx);
      for (int i = 0; i < m; i++) {
        for (int h = 0; h < heads; h++) {
          int kvh = h / f.c.group(), visible = n - m + i + 1, qOff = (i * heads + h) * d;
          int[] want = bruteTopK(f, kv, layer, q, qOff, n - m + i, kvh, visible, k);
          assertArrayEquals(want, cap.byRowHead.get(i * heads + h), "row " + i + " head " + h);
          double[] ref = f.reference(kv, layer, q, qOff, n - m + i, kvh, want, want);
          assertTrue(Fixture.relErr(out, qOff, ref) < 1e-5, "output row " + i + " head " + h);
        }
      }
    }
  }

  @Test
  void aFractionalBudgetScalesWithWhatTheQuerySeesAndCoversEverythingAtOne() {
    try (Fixture f = new Fixture(12)) {
      int n = 64, layer = 0, heads = f.c.numHeads();
      KvCache kv = f.cache(n, n);
      Captured cap = new Captured();
      kv.attended = cap;
      float[] q = f.rand(f.c.qDim()), out = new float[f.c.qDim()];
      ComposedPolicy.of(PolicySpec.parse("oracle:frac=0.25")).decode(layer, q, n - 1, kv, out, f.ctx);
      for (int h = 0; h < heads; h++) {
        int[] want = bruteTopK(f, kv, layer, q, h * f.c.headDim(), n - 1, h / f.c.group(), n, 16); // round(0.25 × 64)
        assertArrayEquals(want, cap.byRowHead.get(h), "head " + h);
      }
      cap.byRowHead.clear();
      ComposedPolicy.of(PolicySpec.parse("oracle:frac=1")).decode(layer, q, n - 1, kv, out, f.ctx);
      for (int h = 0; h < heads; h++) assertEquals(n, cap.byRowHead.get(h).length);
    }
  }

  @Test
  void theShorthandFillsPrefillAndDecodeAndTheGpuRefusesIt() {
    PolicySpec p = PolicySpec.parse("oracle:frac=0.1");
    assertEquals("oracle:k=2048,frac=0.1 + none + oracle:k=2048,frac=0.1", p.canonical());
    assertEquals("prefill policy 'oracle'", p.unsupportedReason(io.longsieve.policy.PolicyCatalog.Backend.CUDA));
  }
}
