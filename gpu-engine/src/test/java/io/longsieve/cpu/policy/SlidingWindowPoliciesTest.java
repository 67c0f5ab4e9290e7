package io.longsieve.cpu.policy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.longsieve.cpu.CpuModel;
import io.longsieve.cpu.CpuWeights;
import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.cpu.kernels.ThreadPool;
import io.longsieve.model.Checkpoint;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicySpec;
import java.nio.file.Path;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Sparse policies on sliding-window layers (docs/models.md): every policy attends densely within the
 * window there and KV compression leaves those layers whole, on the tiny Gemma 3 checkpoint (three
 * local layers with a window of 16, one global layer).
 */
class SlidingWindowPoliciesTest {

  private static final Path GEMMA = Path.of("src/test/resources/models/gemma3-text");
  private static final String SPARSE = "tsa:tau=0.5,min=1,window=4,layers=all + selkv:ratio=0.1,sinks=0,window=2"
      + " + tokenselect:sinks=0,k=3,window=2,chunk=8";

  private static int[] prompt(int n) {
    Random r = new Random(9);
    int[] ids = new int[n];
    for (int i = 0; i < n; i++) ids[i] = r.nextInt(1000);
    return ids;
  }

  /** Every layer sliding: any policy gives dense attention's logits, bit for bit, and compresses nothing. */
  @Test
  void onAModelWhoseLayersAllSlideEveryPolicyIsDenseWithinTheWindow() throws Exception {
    ObjectNode json = (ObjectNode) new ObjectMapper().readTree(GEMMA.resolve("config.json").toFile());
    ArrayNode types = json.putArray("layer_types");
    for (int i = 0; i < 4; i++) types.add("sliding_attention");
    ModelConfig c = ModelConfig.parse(json, "all-sliding");
    assertEquals(4, c.slidingLayers());
    int[] ids = prompt(60);
    try (Checkpoint ck = Checkpoint.open(GEMMA); ThreadPool pool = new ThreadPool(2)) {
      CpuModel model = new CpuModel(c, CpuWeights.load(ck, c), pool, 16);
      float[] dense = run(model, ids, PolicySpec.DENSE, null);
      KvCache[] kv = new KvCache[1];
      float[] sparse = run(model, ids, PolicySpec.parse(SPARSE), kv);
      assertArrayEquals(dense, sparse, "logits after prefill and 6 decode steps");
      for (int l = 0; l < 4; l++) assertEquals(ids.length + 6, kv[0].length(l), "layer " + l + " kept every token");
    }
  }

  /** Gemma 3's mix: the global layer is compressed, the local ones stay whole. */
  @Test
  void compressionTouchesOnlyTheFullAttentionLayers() throws Exception {
    ModelConfig c = ModelConfig.read(GEMMA);
    int[] ids = prompt(60);
    try (Checkpoint ck = Checkpoint.open(GEMMA); ThreadPool pool = new ThreadPool(2)) {
      CpuModel model = new CpuModel(c, CpuWeights.load(ck, c), pool, 16);
      KvCache[] kv = new KvCache[1];
      float[] logits = run(model, ids, PolicySpec.parse("selkv:ratio=0.25,sinks=0,window=2"), kv);
      for (int l = 0; l < 4; l++) {
        int expect = c.window(l) > 0 ? ids.length + 6 : 15 + 6;  // round(0.25 × 60) kept, then 6 decoded
        assertEquals(expect, kv[0].length(l), "layer " + l + (c.window(l) > 0 ? " (sliding)" : " (global)"));
      }
      assertTrue(Float.isFinite(logits[0]));
    }
  }

  /** Prefill then six greedy decode steps through a fresh policy; the last logits. */
  private static float[] run(CpuModel model, int[] ids, PolicySpec spec, KvCache[] keep) {
    ComposedPolicy policy = ComposedPolicy.of(spec);
    KvCache kv = model.newCache(ids.length + 8);
    float[] logits = new float[model.config().vocabSize()];
    model.forward(ids, 0, ids.length, 0, kv, policy, false, logits);
    policy.afterPrefill(kv, model.attentionContext(ids.length));
    for (int s = 0; s < 6; s++) {
      int t = 0;
      for (int i = 1; i < logits.length; i++) if (logits[i] > logits[t]) t = i;
      model.forward(new int[] {t}, 0, 1, ids.length + s, kv, policy, true, logits);
    }
    if (keep != null) keep[0] = kv;
    return logits;
  }
}
