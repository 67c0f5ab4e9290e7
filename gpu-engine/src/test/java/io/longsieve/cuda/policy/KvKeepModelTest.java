package io.longsieve.cuda.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.cpu.kernels.ThreadPool;
import io.longsieve.cpu.policy.AttentionContext;
import io.longsieve.cpu.policy.AttentionPolicy;
import io.longsieve.cpu.policy.ComposedPolicy;
import io.longsieve.cuda.Gpu;
import io.longsieve.cuda.kv.KvAligned;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import io.longsieve.policy.PolicySpec;
import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * CPU only, on the data KvCompressionParityTest uses (same seed, config and draw order):
 * <ol>
 *   <li>the independent keep model (KvKeepModel, which the GPU tests judge flips with) keeps what
 *       the CPU twin keeps, up to ties within KvCompressionParityTest.GPU_TIE_EPS (it sums in
 *       double, the twin in f32), so a GPU run failing against it points at the GPU;</li>
 *   <li>the same model fed the rotated keys rounded to bf16 (what the GPU stores) keeps another set
 *       only at near-ties of the f32 scores (TIE_EPS) and on at most 1 % of a head's slots. On this
 *       data bf16 keys alone flip 1 to 2 decisions in six of the seven policies (not merge=off), and
 *       the former row-by-row metric of those flips is exactly what the H200 run reported (0.596,
 *       0.568, 0.97 for SnapKV; 0.77, 0.68, 0.88 for SelKV, whose merged rows lose a few more).</li>
 * </ol>
 */
class KvKeepModelTest {

  @ParameterizedTest
  @ValueSource(strings = {"selkv:ratio=0.25,merge=off", "selkv:ratio=0.25,merge=values", "selkv:ratio=0.25,merge=kv",
      "selkv:ratio=0.3,merge=values,pool=5", "selkv:ratio=0.2,merge=kv,alpha=0.5,pool=4,sinks=8,window=16",
      "snapkv:capacity=300", "snapkv:ratio=0.25,pool=1", "snapkv:capacity=257,pool=4,window=20"})
  void modelKeepsWhatTheCpuTwinKeeps(String policy) {
    Random r = new Random(policy.hashCode());
    ModelConfig c = KvCompressionParityTest.config(2, 8, 2, 128);
    Rope rope = new Rope(c);
    int total = 1000, first = 600, kvDim = c.kvDim(), qDim = c.qDim();
    PolicySpec spec = PolicySpec.parse(policy);
    AttentionPolicy cpu = ComposedPolicy.of(spec);
    KvCache kv = new KvCache(c, rope, total);
    float[][] qAll = new float[c.numLayers()][total * qDim];
    try (ThreadPool pool = new ThreadPool(0)) {
      AttentionContext actx = new AttentionContext(c, rope, pool);
      for (int s = 0; s < total; s = s == 0 ? first : total) {
        int n = s == 0 ? first : total - first;
        for (int l = 0; l < c.numLayers(); l++) {
          float[] k = Gpu.random(r, n * kvDim, 1), v = Gpu.random(r, n * kvDim, 1), q = Gpu.random(r, n * qDim, 1);
          kv.append(l, k, 0, v, 0, n, s);
          System.arraycopy(q, 0, qAll[l], s * qDim, n * qDim);
          cpu.prefill(l, q, n, s, kv, new float[n * qDim], actx);
        }
      }
      KvKeepModel.Selection[] f32 = KvKeepModel.of(spec, c, rope, kv, qAll, total,
          KvCompressionParityTest.TIE_EPS, false);
      KvKeepModel.Selection[] exact = KvKeepModel.of(spec, c, rope, kv, qAll, total,
          KvCompressionParityTest.GPU_TIE_EPS, false);
      KvKeepModel.Selection[] bf16 = KvKeepModel.of(spec, c, rope, kv, qAll, total,
          KvCompressionParityTest.GPU_TIE_EPS, true);
      cpu.afterPrefill(kv, actx);
      int flipped = 0;
      for (int l = 0; l < c.numLayers(); l++) {
        for (int g = 0; g < c.numKvHeads(); g++) {
          int[] got = KvAligned.cpuPositions(kv, l, g);
          String what = policy + " layer " + l + " head " + g;
          assertEquals(exact[l].keep()[g].length, got.length, what + ": kept");
          KvKeepModel.assertFlipsAreTies(exact[l].keep()[g], got, exact[l].nearTie()[g], what + " (CPU twin)");
          int diff = KvKeepModel.assertFlipsAreTies(f32[l].keep()[g], bf16[l].keep()[g], f32[l].nearTie()[g],
              what + " (bf16 keys)");
          assertTrue(diff <= 0.01 * got.length, what + ": bf16 keys flip " + diff);
          flipped += diff;
        }
      }
      System.out.printf("%s: bf16 rotated keys flip %d keep decisions%n", policy, flipped);
    }
  }
}
