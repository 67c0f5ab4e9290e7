package io.longsieve.cpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.model.Checkpoint;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.SelectionProbe;
import io.longsieve.policy.SelectionReference;
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
 * scores are recomputed in fp64 from the reported queries and keys alone, the way the official code
 * computes them ({@link SelectionReference}), and the reported lists are exactly the top of the
 * reported scores (ties to the lower slot) with the window / sinks and local window around them. So
 * the dump holds the inputs the selection really came from. TSA's lists also equal
 * {@link TsaSelections}'; every decode step of every layer reports.
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

  /** The reports of one run (prefill, then decode steps), the probe removed afterwards. */
  static SelectionReference.Recorder run(String policy, int steps, List<TsaSelections.Selection> tsaLists) {
    SelectionReference.Recorder got = new SelectionReference.Recorder();
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
    SelectionReference.Recorder got = run("tsa:tau=0.2,min=32,window=16,pool=7,layers=all,chunk=128", 0, lists);
    ModelConfig c = model.config();
    assertEquals(lists.size(), got.tsa.size(), "one report per sparse selection");
    assertTrue(got.tsa.size() >= c.numLayers(), "some selections: " + got.tsa.size());
    for (int i = 0; i < got.tsa.size(); i++) {
      SelectionProbe.Tsa s = got.tsa.get(i);
      String what = "layer " + s.layer() + " chunk at " + s.pos0();
      int w = s.w(), prefix = s.end() - w, keep = s.keep(), len = keep + w;
      assertEquals(16, w, what);
      assertEquals(s.end() * c.kvDim(), got.tsaKeys.get(i).length, what + ": keys of every cached slot");
      SelectionReference.assertClose(SelectionReference.tsaScores(s, got.tsaKeys.get(i), c, 7), s.scores(), 1e-4,
          what + ": scores recomputed from the reported queries and keys");
      for (int h = 0; h < c.numHeads(); h++) {
        int[] list = Arrays.copyOfRange(s.lists(), h * len, (h + 1) * len);
        assertArrayEquals(lists.get(i).positions()[h], list, what + " head " + h + ": TsaSelections' lists");
        assertArrayEquals(topSorted(s.scores(), h * prefix, prefix, keep), Arrays.copyOf(list, keep),
            what + " head " + h + ": the top of the reported scores");
        for (int e = 0; e < w; e++) assertEquals(prefix + e, list[keep + e], what + ": the window last");
      }
    }
  }

  @Test
  void tokenSelectReportsTheInputsItsVotesComeFrom() {
    SelectionReference.Recorder got = run("tokenselect:sinks=4,k=24,window=16,chunk=16,gqa=mod", 3, null);
    ModelConfig c = model.config();
    int sinks = 4, local = 16;
    long decodes = got.ts.stream().filter(SelectionProbe.TokenSelect::decode).count();
    assertEquals(3L * c.numLayers(), decodes, "every decode step of every layer selects");
    assertTrue(got.ts.size() > decodes, "prefill sub-chunks select too");
    for (int i = 0; i < got.ts.size(); i++) {
      SelectionProbe.TokenSelect s = got.ts.get(i);
      String what = "layer " + s.layer() + " at " + s.pos0();
      int cands = s.end() - local - sinks, count = Math.min(24, cands);
      assertEquals(1, s.listCount(), what + ": one list per layer (heads=layer)");
      assertEquals(sinks + count + local, s.lists().length, what);
      SelectionReference.assertClose(SelectionReference.tokenSelectVotes(s, got.tsKeys.get(i), c, sinks, local, true),
          s.votes(), 1e-4, what + ": votes recomputed from the reported queries and keys");
      int[] top = topSorted(s.votes(), 0, cands, count);
      for (int k = 0; k < count; k++) top[k] += sinks;
      assertArrayEquals(top, Arrays.copyOfRange(s.lists(), sinks, sinks + count), what + ": the top of the votes");
      for (int k = 0; k < sinks; k++) assertEquals(k, s.lists()[k], what + ": sinks first");
      for (int k = 0; k < local; k++) assertEquals(s.end() - local + k, s.lists()[sinks + count + k], what + ": local last");
    }
  }

  /** Indices of the n largest of v[off, off + len) (ties: the lower index, as the CPU's TopK), ascending. */
  static int[] topSorted(float[] v, int off, int len, int n) {
    Integer[] idx = new Integer[len];
    for (int i = 0; i < len; i++) idx[i] = i;
    Arrays.sort(idx, (a, b) -> v[off + a] != v[off + b] ? Float.compare(v[off + b], v[off + a]) : Integer.compare(a, b));
    int[] top = new int[n];
    for (int i = 0; i < n; i++) top[i] = idx[i];
    Arrays.sort(top);
    return top;
  }
}
