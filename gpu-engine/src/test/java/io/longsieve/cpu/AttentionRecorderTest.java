package io.longsieve.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.cpu.kernels.ThreadPool;
import io.longsieve.cpu.policy.AttentionContext;
import io.longsieve.cpu.policy.AttentionPolicy;
import io.longsieve.cpu.policy.ComposedPolicy;
import io.longsieve.engine.spi.AttentionRecall;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import io.longsieve.model.RopeScaling;
import io.longsieve.policy.PolicySpec;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Attention recall as the recorder measures it equals, per probed query and head, the fp64 softmax mass
 * of the keys the policy attended: 1 for dense attention, the top-k mass for the oracle, the window's mass
 * for StreamingLLM (whose compact positions do not change which tokens it attends).
 */
class AttentionRecorderTest {

  static final ModelConfig C = new ModelConfig("llama", 32, 16, 1, 4, 2, 8, 32, 1e-5, 10000.0, RopeScaling.NONE,
      1 << 16, false, false, 0, -1, List.of());
  static final Rope ROPE = new Rope(C);

  /** Prompt of n random tokens in one prefill call, then one decode step, under policy; recall at `positions`. */
  static AttentionRecall run(String policy, int n, int[] positions, long seed, double[][] keysOut, float[][] qOut) {
    Random r = new Random(seed);
    try (ThreadPool pool = new ThreadPool(2)) {
      AttentionContext ctx = new AttentionContext(C, ROPE, pool);
      KvCache kv = new KvCache(C, ROPE, n + 1);
      AttentionRecorder rec = new AttentionRecorder(C, ROPE, kv, positions);
      kv.attended = rec;
      AttentionPolicy p = ComposedPolicy.of(PolicySpec.parse(policy));
      float[] q = rand(r, (n + 1) * C.qDim()), k = rand(r, (n + 1) * C.kvDim()), v = rand(r, (n + 1) * C.kvDim());
      float[] out = new float[(n + 1) * C.qDim()];
      kv.append(0, k, 0, v, 0, n, 0);
      rec.beforeAttention(0, q, k, v, n, 0, false);
      p.prefill(0, q, n, 0, kv, out, ctx);
      rec.afterAttention(0);
      p.afterPrefill(kv, ctx);
      float[] qd = Arrays.copyOfRange(q, n * C.qDim(), (n + 1) * C.qDim());
      float[] kd = Arrays.copyOfRange(k, n * C.kvDim(), (n + 1) * C.kvDim());
      float[] vd = Arrays.copyOfRange(v, n * C.kvDim(), (n + 1) * C.kvDim());
      kv.append(0, kd, 0, vd, 0, 1, n);
      rec.beforeAttention(0, qd, kd, vd, 1, n, true);
      p.decode(0, qd, n, kv, new float[C.qDim()], ctx);
      rec.afterAttention(0);
      if (keysOut != null) {
        for (int i = 0; i <= n; i++) for (int e = 0; e < C.kvDim(); e++) keysOut[i][e] = k[i * C.kvDim() + e];
        qOut[0] = q;
      }
      return rec.result();
    }
  }

  static float[] rand(Random r, int n) {
    float[] a = new float[n];
    for (int i = 0; i < n; i++) a[i] = (float) r.nextGaussian();
    return a;
  }

  /** fp64 softmax of query row `pos` head h over keys 0..pos, each rotated at its position. */
  static double[] probs(double[][] keys, float[] q, int pos, int h) {
    int d = C.headDim(), kvh = h / C.group();
    float[] qr = Arrays.copyOfRange(q, (pos * C.numHeads() + h) * d, (pos * C.numHeads() + h + 1) * d);
    ROPE.rotate(qr, 0, 1, pos);
    double[] s = new double[pos + 1];
    double max = Double.NEGATIVE_INFINITY;
    for (int j = 0; j <= pos; j++) {
      float[] kj = new float[d];
      for (int e = 0; e < d; e++) kj[e] = (float) keys[j][kvh * d + e];
      ROPE.rotate(kj, 0, 1, j);
      for (int e = 0; e < d; e++) s[j] += (double) qr[e] * kj[e];
      s[j] /= Math.sqrt(d);
      max = Math.max(max, s[j]);
    }
    double z = 0;
    for (int j = 0; j <= pos; j++) z += s[j] = Math.exp(s[j] - max);
    for (int j = 0; j <= pos; j++) s[j] /= z;
    return s;
  }

  @Test
  void denseRecallsEverything() {
    AttentionRecall a = run("dense", 40, new int[] {9, 39, 40}, 1, null, null);
    assertEquals(1.0, a.byLayer()[0], 1e-9);
    assertEquals(1.0, a.prefill(), 1e-9);
    assertEquals(1.0, a.decode(), 1e-9);
    assertEquals(2, a.prefillPositions());
    assertEquals(1, a.decodePositions());
  }

  @Test
  void theOracleRecallsItsTopKMassAndAWindowItsWindowMass() {
    int n = 50, k = 6;
    for (String policy : new String[] {"oracle:k=" + k, "streaming:sinks=2,recent=4"}) {
      double[][] keys = new double[n + 1][C.kvDim()];
      float[][] q = new float[1][];
      AttentionRecall a = run(policy, n, new int[] {29, 49, 50}, 2, keys, q);
      double prefill = 0, decode = 0;
      for (int pos : new int[] {29, 49, 50}) {
        for (int h = 0; h < C.numHeads(); h++) {
          double[] p = probs(keys, q[0], pos, h);
          double mass = 0;
          if (policy.startsWith("oracle")) {
            double[] sorted = p.clone();
            Arrays.sort(sorted);
            for (int i = 0; i < k; i++) mass += sorted[sorted.length - 1 - i];
          } else if (pos == n) {  // streaming decodes over sinks + recent; its prefill is dense
            for (int j = 0; j < 2; j++) mass += p[j];
            for (int j = pos - 3; j <= pos; j++) mass += p[j];
          } else {
            mass = 1;
          }
          if (pos < n) prefill += mass / (2 * C.numHeads());
          else decode += mass / C.numHeads();
        }
      }
      assertEquals(prefill, a.prefill(), 1e-6, policy);
      assertEquals(decode, a.decode(), 1e-6, policy);
      assertTrue(a.decode() < 1, policy);
    }
  }

  @Test
  void recallMustStartWithTheSequence() {
    KvCache kv = new KvCache(C, ROPE, 8);
    AttentionRecorder rec = new AttentionRecorder(C, ROPE, kv, new int[] {5});
    float[] k = new float[C.kvDim()];
    assertThrows(IllegalStateException.class, () -> rec.beforeAttention(0, new float[C.qDim()], k, k, 1, 3, true));
    assertThrows(IllegalArgumentException.class, () -> new AttentionRecorder(C, ROPE, kv, new int[] {5, 5}));
  }
}
