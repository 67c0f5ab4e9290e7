package io.longsieve.cpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.model.Checkpoint;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.SelectionProbe;
import io.longsieve.policy.TsaSelections;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * What the CPU's TSA and TokenSelect report to a {@link SelectionProbe} (the input of the official
 * cross-check, tools/gpu_host/official_crosscheck.py) on the tiny llama-gqa model: every report's
 * scores are recomputed here in fp64 from the reported queries and keys alone, the way the official
 * code computes them (TSA: the window's mean softmax probability over the rotated keys, avg-pooled;
 * TokenSelect: the fingerprint of the pre-RoPE queries rotated at window + i against the pre-RoPE
 * keys of KV head h % nKv, softmax per head, summed), and the reported lists are the top of those
 * scores (ties to the lower slot) with the window / sinks and local window around them. So the dump
 * holds the inputs the selection really came from. TSA's lists also equal {@link TsaSelections}'.
 */
class SelectionProbeTest {

  static final Path MODEL = Path.of("src/test/resources/models/llama-gqa");
  static final int PROMPT = 300;

  static LoadedModel model;
  static CpuRunner runner;
  static int[] prompt;

  @BeforeAll
  static void open() {
    model = LoadedModel.load(MODEL);
    try (Checkpoint ck = Checkpoint.open(MODEL)) {
      runner = new CpuRunner(model.config(), ck, 2, 64);
    }
    Random r = new Random(11);
    prompt = new int[PROMPT];
    for (int i = 0; i < PROMPT; i++) prompt[i] = r.nextInt(model.config().vocabSize() - 8);
  }

  @AfterAll
  static void close() {
    runner.close();
    model.close();
  }

  /** Collects the reports of one run (prefill, then decode steps), the probe removed afterwards. */
  static final class Reports implements SelectionProbe.Listener {
    final List<SelectionProbe.Tsa> tsa = new ArrayList<>();
    final List<SelectionProbe.TokenSelect> ts = new ArrayList<>();
    final List<float[]> keys = new ArrayList<>();  // read during the call, as the dump does

    @Override
    public void tsa(SelectionProbe.Tsa s) {
      tsa.add(s);
      keys.add(s.keys().get());
    }

    @Override
    public void tokenSelect(SelectionProbe.TokenSelect s) {
      ts.add(s);
      keys.add(s.keys().get());
    }
  }

  static Reports run(String policy, int steps, List<TsaSelections.Selection> tsaLists) {
    Reports got = new Reports();
    float[] logits = new float[model.config().vocabSize()];
    SelectionProbe.install(got);
    if (tsaLists != null) TsaSelections.record(tsaLists::add);
    try (ModelRunner.Sequence s = runner.open(PROMPT + steps + 1, PolicySpec.parse(policy))) {
      s.prefill(prompt, logits);
      for (int i = 0; i < steps; i++) s.decode(prompt[i], PROMPT + i, logits);
    } finally {
      SelectionProbe.install(null);
      TsaSelections.record(null);
    }
    return got;
  }

  @Test
  void tsaReportsTheInputsItsProxyScoresComeFrom() {
    List<TsaSelections.Selection> lists = new ArrayList<>();
    Reports got = run("tsa:tau=0.2,min=32,window=16,pool=7,layers=all,chunk=128", 0, lists);
    ModelConfig c = model.config();
    int heads = c.numHeads(), kvDim = c.kvDim(), d = c.headDim();
    assertEquals(lists.size(), got.tsa.size(), "one report per sparse selection");
    assertTrue(got.tsa.size() >= c.numLayers(), "some selections: " + got.tsa.size());
    for (int i = 0; i < got.tsa.size(); i++) {
      SelectionProbe.Tsa s = got.tsa.get(i);
      String what = "layer " + s.layer() + " chunk at " + s.pos0();
      int w = s.w(), prefix = s.end() - w, keep = s.keep(), len = keep + w;
      assertEquals(16, w, what);
      assertEquals(s.end() * kvDim, got.keys.get(i).length, what + ": keys of every cached slot");
      double[] ref = new double[heads * prefix];
      for (int h = 0; h < heads; h++) {
        double[] mass = new double[prefix];
        for (int r = 0; r < w; r++) {  // window query r sees slots [0, prefix + r]
          double[] p = new double[prefix + r + 1];
          for (int j = 0; j < p.length; j++) {
            p[j] = dot(s.queries(), (r * heads + h) * d, got.keys.get(i), j * kvDim + (h / c.group()) * d, d) / Math.sqrt(d);
          }
          softmax(p);
          for (int j = 0; j < prefix; j++) mass[j] += p[j] / w;
        }
        for (int j = 0; j < prefix; j++) {  // avg_pool1d(7, padding 3, zeros counted)
          double sum = 0;
          for (int t = j - 3; t <= j + 3; t++) if (t >= 0 && t < prefix) sum += mass[t];
          ref[h * prefix + j] = sum / 7;
        }
        int[] list = Arrays.copyOfRange(s.lists(), h * len, (h + 1) * len);
        assertArrayEquals(lists.get(i).positions()[h], list, what + " head " + h + ": TsaSelections' lists");
        assertArrayEquals(topSorted(s.scores(), h * prefix, prefix, keep), Arrays.copyOf(list, keep),
            what + " head " + h + ": the top of the reported scores");
        for (int e = 0; e < w; e++) assertEquals(prefix + e, list[keep + e], what + ": the window last");
      }
      assertClose(ref, s.scores(), what + ": scores recomputed from the reported queries and keys");
    }
  }

  @Test
  void tokenSelectReportsTheInputsItsVotesComeFrom() {
    Reports got = run("tokenselect:sinks=4,k=24,window=16,chunk=16,gqa=mod", 3, null);
    ModelConfig c = model.config();
    Rope rope = new Rope(c);
    int heads = c.numHeads(), kv = c.numKvHeads(), kvDim = c.kvDim(), d = c.headDim(), sinks = 4, local = 16;
    long decodes = got.ts.stream().filter(SelectionProbe.TokenSelect::decode).count();
    assertEquals(3L * c.numLayers(), decodes, "every decode step of every layer selects");
    assertTrue(got.ts.size() > decodes, "prefill sub-chunks select too");
    float[] cos = new float[d / 2], sin = new float[d / 2];
    for (int i = 0; i < got.ts.size(); i++) {
      SelectionProbe.TokenSelect s = got.ts.get(i);
      String what = "layer " + s.layer() + " at " + s.pos0();
      int cands = s.end() - local - sinks, count = Math.min(24, cands);
      assertEquals(1, s.listCount(), what + ": one list per layer (heads=layer)");
      assertEquals(sinks + count + local, s.lists().length, what);
      float[] keys = got.keys.get(i);
      double[] qf = new double[heads * d];  // fingerprint: rows rotated at local + r, averaged
      for (int r = 0; r < s.rows(); r++) {
        float[] row = Arrays.copyOfRange(s.queries(), r * heads * d, (r + 1) * heads * d);
        rope.angles(local + r, cos, sin);
        rope.apply(row, 0, heads, cos, sin);
        for (int j = 0; j < row.length; j++) qf[j] += row[j] / (double) s.rows();
      }
      double[] votes = new double[cands];
      for (int h = 0; h < heads; h++) {
        double[] p = new double[cands];
        for (int k = 0; k < cands; k++) {
          int ko = (sinks + k) * kvDim + (h % kv) * d;  // gqa=mod: the official kernel's h % nKv
          for (int j = 0; j < d; j++) p[k] += qf[h * d + j] * keys[ko + j];
        }
        softmax(p);
        for (int k = 0; k < cands; k++) votes[k] += p[k];
      }
      assertClose(votes, s.votes(), what + ": votes recomputed from the reported queries and keys");
      int[] top = topSorted(s.votes(), 0, cands, count);
      for (int k = 0; k < count; k++) top[k] += sinks;
      assertArrayEquals(top, Arrays.copyOfRange(s.lists(), sinks, sinks + count), what + ": the top of the votes");
      for (int k = 0; k < sinks; k++) assertEquals(k, s.lists()[k], what + ": sinks first");
      for (int k = 0; k < local; k++) assertEquals(s.end() - local + k, s.lists()[sinks + count + k], what + ": local last");
    }
  }

  static double dot(float[] a, int ao, float[] b, int bo, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double) a[ao + i] * b[bo + i];
    return s;
  }

  static void softmax(double[] v) {
    double max = Double.NEGATIVE_INFINITY, sum = 0;
    for (double x : v) max = Math.max(max, x);
    for (int i = 0; i < v.length; i++) sum += v[i] = Math.exp(v[i] - max);
    for (int i = 0; i < v.length; i++) v[i] /= sum;
  }

  /** Indices of the n largest of v[off, off + len) (ties: the lower index), ascending. */
  static int[] topSorted(float[] v, int off, int len, int n) {
    Integer[] idx = new Integer[len];
    for (int i = 0; i < len; i++) idx[i] = i;
    Arrays.sort(idx, (a, b) -> v[off + a] != v[off + b] ? Float.compare(v[off + b], v[off + a]) : Integer.compare(a, b));
    int[] top = new int[n];
    for (int i = 0; i < n; i++) top[i] = idx[i];
    Arrays.sort(top);
    return top;
  }

  /** fp32 scores against the fp64 reference: within 1e-4 of the largest. */
  static void assertClose(double[] ref, float[] got, String what) {
    double max = 0, err = 0;
    for (int i = 0; i < ref.length; i++) {
      max = Math.max(max, Math.abs(ref[i]));
      err = Math.max(err, Math.abs(ref[i] - got[i]));
    }
    assertTrue(err <= 1e-4 * max, what + ": max error " + err + " of " + max);
  }
}
