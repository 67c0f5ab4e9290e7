package io.longsieve.cpu.policy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.cpu.kernels.KvList;
import io.longsieve.cpu.kernels.ThreadPool;
import io.longsieve.cpu.kernels.TiledAttention;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.RopeScaling;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/**
 * Dense attention on the tiled core (cpu/kernels/TiledAttention) against the definition in fp64
 * ({@link Fixture#reference}) on random shapes: GQA groups of 1 to 8, head sizes that are not
 * multiples of the vector width, chunks of odd lengths after a cached prefix, logit biases, decode
 * over caches longer than one split segment, sliding windows by position (also after a
 * compaction left gaps), and results that do not change with the thread count. Lists of slots and
 * gathered keys (the sparse policies' attention) against the plain {@link ListAttention}.
 */
class TiledAttentionTest {

  private static final int[][] SHAPES = { // heads, kvHeads, headDim
      {4, 2, 8}, {6, 2, 24}, {3, 3, 40}, {8, 1, 72}, {4, 4, 64}, {5, 1, 18}}; // 18: even (RoPE rotates pairs), not a multiple of the vector width

  @Test
  void prefillAndDecodeMatchTheDefinition() {
    Random r = new Random(21);
    for (int t = 0; t < 14; t++) {
      int[] s = SHAPES[t % SHAPES.length];
      try (Fixture f = new Fixture(1, s[0], s[1], s[2], 100 + t)) {
        int before = t < 3 ? 0 : r.nextInt(300), n = t % 4 == 3 ? 1 : 1 + r.nextInt(130);
        if (t == 13) before = 2300; // decode split into segments
        KvCache kv = f.cache(before + n, before + n);
        if (t % 3 == 1) fillBias(kv, f.r);
        float[] q = f.rand(n * f.c.qDim()), out = new float[n * f.c.qDim()];
        new DenseAttention().prefill(0, q, n, before, kv, out, f.ctx);
        check(f, kv, 0, q, out, n, before, 0, "shape " + s[0] + "/" + s[1] + "/" + s[2] + " before " + before + " n " + n);
      }
    }
  }

  @Test
  void slidingWindowByPosition() {
    Random r = new Random(22);
    for (int t = 0; t < 6; t++) {
      int[] s = SHAPES[t % SHAPES.length];
      int window = 1 + r.nextInt(200);
      ModelConfig c = new ModelConfig("llama", s[0] * s[2], 16, 2, s[0], s[1], s[2], 32, 1e-5, 10000.0,
          RopeScaling.NONE, 1 << 16, false, false, window, -1, List.of());
      try (Fixture f = new Fixture(c, 200 + t)) {
        int before = r.nextInt(400), n = t % 2 == 0 ? 1 : 1 + r.nextInt(100);
        KvCache kv = f.cache(before + n + 300, before);
        if (t >= 3 && before >= 2) { // compaction leaves gaps in the positions; later tokens append after them
          int keep = Math.max(1, before / 2);
          int[] slots = new int[keep];
          for (int i = 0; i < keep; i++) slots[i] = i * before / keep;
          int[][] all = new int[s[1]][];
          Arrays.fill(all, slots);
          for (int l = 0; l < c.numLayers(); l++) kv.retain(l, all, keep);
        }
        int pos0 = before + 50;
        f.append(kv, n, pos0);
        int cached = kv.length(1) - n;
        float[] q = f.rand(n * c.qDim()), out = new float[n * c.qDim()];
        new DenseAttention().prefill(1, q, n, pos0, kv, out, f.ctx);
        check(f, kv, 1, q, out, n, cached, window, "window " + window + " before " + before + " n " + n + " gaps " + (t >= 3));
      }
    }
  }

  @Test
  void resultsDoNotDependOnTheThreadCount() {
    try (Fixture f = new Fixture(1, 6, 2, 24, 31); ThreadPool one = new ThreadPool(1)) {
      AttentionContext single = new AttentionContext(f.c, f.rope, one);
      for (int[] chunk : new int[][] {{0, 200}, {2500, 1}, {700, 33}}) {
        int before = chunk[0], n = chunk[1];
        KvCache kv = f.cache(before + n, before + n);
        float[] q = f.rand(n * f.c.qDim()), a = new float[q.length], b = new float[q.length];
        new DenseAttention().prefill(0, q, n, before, kv, a, f.ctx);
        new DenseAttention().prefill(0, q, n, before, kv, b, single);
        assertArrayEquals(b, a, "before " + before + " n " + n);
      }
    }
  }

  @Test
  void slotListsAndGatheredKeysMatchThePlainListAttention() {
    Random r = new Random(23);
    for (int t = 0; t < 12; t++) {
      int[] s = SHAPES[t % SHAPES.length];
      try (Fixture f = new Fixture(1, s[0], s[1], s[2], 300 + t)) {
        int cached = 50 + r.nextInt(400), len = 1 + r.nextInt(Math.min(cached, 300)), m = 1 + r.nextInt(Math.min(len, 40));
        KvCache kv = f.cache(cached, cached);
        if (t % 2 == 1) fillBias(kv, f.r);
        int heads = s[0], kvHeads = s[1], d = s[2], group = heads / kvHeads;
        int[] lists = new int[kvHeads * len]; // per KV head: ascending distinct slots
        for (int g = 0; g < kvHeads; g++) {
          int[] pick = r.ints(0, cached).distinct().limit(len).sorted().toArray();
          System.arraycopy(pick, 0, lists, g * len, len);
        }
        boolean gathered = t % 3 == 0;
        float[] keyBuf = gathered ? f.rand(kvHeads * len * d) : null; // entry keys already "rotated"
        float[] q = f.rand(m * heads * d), tiled = new float[q.length], plain = new float[q.length];
        float scale = f.ctx.scale();
        TiledAttention.run(f.pool, f.ctx.tiles(), kvHeads, group, d, scale, new TiledAttention.Problem() {
          @Override
          public int positions(int g) {
            return m;
          }

          @Override
          public KvList keys(int g) {
            return gathered ? KvList.gathered(kv, 0, g, lists, g * len, keyBuf, g * len * d)
                : KvList.slots(kv, 0, g, lists, g * len);
          }

          @Override
          public void query(int g, int i, int hh, float[] dst, int off) {
            System.arraycopy(q, (i * heads + g * group + hh) * d, dst, off, d);
          }

          @Override
          public int from(int g, int i) {
            return i % 3 == 2 ? i : 0; // some rows start later in the list
          }

          @Override
          public int to(int g, int i) {
            return len - m + i + 1;
          }

          @Override
          public int outOffset(int g, int i, int hh) {
            return (i * heads + g * group + hh) * d;
          }
        }, tiled);
        for (int i = 0; i < m; i++) {
          int from = i % 3 == 2 ? i : 0, count = len - m + i + 1 - from;
          for (int h = 0; h < heads; h++) {
            int g = h / group, o = (i * heads + h) * d;
            ListAttention.attend(0, h, q, o, lists, g * len + from, count, keyBuf, g * len * d + from * d, kv, plain, o,
                scale);
          }
        }
        double err = Fixture.relErr(tiled, plain);
        assertTrue(err < 1e-5, "shape " + s[0] + "/" + s[1] + "/" + d + " len " + len + " m " + m + " gathered "
            + gathered + ": off by " + err);
      }
    }
  }

  /** Every (row, head) against the fp64 definition over the slots it sees: causal, and within the window if any. */
  private static void check(Fixture f, KvCache kv, int layer, float[] q, float[] out, int n, int cached, int window,
                            String what) {
    ModelConfig c = f.c;
    int d = c.headDim();
    for (int k = 0; k <= 9; k++) { // ten rows of the chunk, the first and the last among them: the fp64 reference is slow
      int i = k == 9 ? n - 1 : k * n / 10;
      int end = cached + i + 1, pos = kv.position(layer, end - 1, 0);
      for (int h = 0; h < c.numHeads(); h++) {
        int g = h / c.group();
        int[] slots = IntStream.range(0, end).filter(slot -> window == 0 || kv.position(layer, slot, g) > pos - window)
            .toArray();
        int[] keyPos = Arrays.stream(slots).map(slot -> kv.position(layer, slot, g)).toArray();
        double[] ref = f.reference(kv, layer, q, (i * c.numHeads() + h) * d, pos, h, slots, keyPos);
        double err = Fixture.relErr(out, (i * c.numHeads() + h) * d, ref);
        assertTrue(err < 1e-4, what + ": row " + i + " head " + h + " off by " + err);
      }
    }
  }

  private static void fillBias(KvCache kv, Random r) {
    float[] bias = kv.logitBias(0);
    for (int i = 0; i < bias.length; i++) bias[i] = (float) r.nextGaussian();
  }
}
