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
    return run(runner, policy, steps, tsaLists);
  }

  static SelectionReference.Recorder run(CpuRunner runner, String policy, int steps,
                                         List<TsaSelections.Selection> tsaLists) {
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

  /**
   * The forward chunk changes the order of the reports (each chunk runs every layer before the next)
   * and nothing else: in position order a runner with 64-token chunks and one with 192-token chunks
   * (both multiples of the sub-chunk, as the CPU's default 2048 and the GPU's 4096 are of the default 512)
   * report the same sub-chunks with the same queries and lists. SelectionProbeParityTest compares
   * the CPU and the GPU so.
   */
  @Test
  void tokenSelectReportsTheSameSelectionsInPositionOrderWhateverTheForwardChunk() {
    String policy = "tokenselect:sinks=4,k=24,window=16,chunk=16,gqa=mod";
    SelectionReference.Recorder small = run(policy, 2, null), large;
    try (Checkpoint ck = Checkpoint.open(MODEL); CpuRunner wide = new CpuRunner(model.config(), ck, 2, 192)) {
      large = run(wide, policy, 2, null);
    }
    assertEquals(small.ts.size(), large.ts.size(), "selections");
    boolean sameOrder = true;
    for (int i = 0; i < small.ts.size(); i++) {
      sameOrder &= small.ts.get(i).pos0() == large.ts.get(i).pos0() && small.ts.get(i).layer() == large.ts.get(i).layer();
    }
    assertTrue(!sameOrder, "the forward chunks order the reports differently");
    SelectionReference.Recorder a = small.inPositionOrder(), b = large.inPositionOrder();
    for (int i = 0; i < a.ts.size(); i++) {
      SelectionProbe.TokenSelect x = a.ts.get(i), y = b.ts.get(i);
      String what = "layer " + x.layer() + " at " + x.pos0();
      assertEquals(x.layer(), y.layer(), what);
      assertEquals(x.pos0(), y.pos0(), what);
      assertEquals(x.rows(), y.rows(), what);
      assertEquals(x.end(), y.end(), what);
      assertArrayEquals(x.queries(), y.queries(), what + ": queries");
      assertArrayEquals(x.lists(), y.lists(), what + ": lists");
      assertArrayEquals(a.tsKeys.get(i), b.tsKeys.get(i), what + ": keys");
    }
  }

  /**
   * Why SelectionProbeParityTest compares another run's keys only below
   * {@link SelectionReference#firstTsaDivergence}: two CPU runs whose tau differs a little move a few
   * tokens across the keep cut-off; below the first slot an earlier layer moved, every later layer's
   * keys are bit for bit the same (TSA is causal), and above it some differ.
   */
  @Test
  void tsaKeysAgreeBelowTheFirstSlotAnEarlierSelectionMoved() {
    SelectionReference.Recorder a = run("tsa:tau=0.2,min=32,window=16,pool=7,layers=all,chunk=128", 0, null)
        .inPositionOrder();
    SelectionReference.Recorder b = run("tsa:tau=0.21,min=32,window=16,pool=7,layers=all,chunk=128", 0, null)
        .inPositionOrder();
    assertEquals(a.tsa.size(), b.tsa.size(), "sparse selections");
    int kvDim = model.config().kvDim(), moved = 0;
    boolean differAbove = false;
    for (int i = 0; i < a.tsa.size(); i++) {
      SelectionProbe.Tsa x = a.tsa.get(i), y = b.tsa.get(i);
      String what = "layer " + x.layer() + " at " + x.pos0();
      assertEquals(x.layer(), y.layer(), what);
      assertEquals(x.pos0(), y.pos0(), what);
    }
    for (int i = 0; i < a.tsa.size(); i++) {
      SelectionProbe.Tsa x = a.tsa.get(i);
      int same = (int) Math.min(x.end(), SelectionReference.firstTsaDivergence(a.tsa, b.tsa, i));
      if (same < x.end()) moved++;
      float[] kx = a.tsaKeys.get(i), ky = b.tsaKeys.get(i);
      assertArrayEquals(Arrays.copyOf(kx, same * kvDim), Arrays.copyOf(ky, same * kvDim),
          "layer " + x.layer() + " at " + x.pos0() + ": keys below slot " + same);
      differAbove |= !Arrays.equals(kx, ky);
    }
    assertTrue(moved > 0, "an earlier selection moved a token for some report");
    assertTrue(differAbove, "keys above the first moved slot differ");
  }

  /**
   * The same for TokenSelect's queries and {@link SelectionReference#firstTokenSelectDivergence}: scoring
   * an int4 copy of the keys moves a few near-tied candidates across the top-k, as bf16 keys may on the
   * GPU; a block's queries are bit for bit the same below the first position an earlier layer's lists
   * differ at, and some later ones differ.
   */
  @Test
  void tokenSelectQueriesAgreeBelowTheFirstBlockAnEarlierLayerSelectedDifferently() {
    String policy = "tokenselect:sinks=4,k=24,window=16,chunk=16,gqa=mod";
    SelectionReference.Recorder a = run(policy, 2, null).inPositionOrder();
    SelectionReference.Recorder b = run(policy + ",index=int4", 2, null).inPositionOrder();
    assertEquals(a.ts.size(), b.ts.size(), "selections");
    int qRow = model.config().numHeads() * model.config().headDim(), moved = 0, compared = 0;
    boolean differAbove = false;
    for (int i = 0; i < a.ts.size(); i++) {
      SelectionProbe.TokenSelect x = a.ts.get(i), y = b.ts.get(i);
      String what = "layer " + x.layer() + " at " + x.pos0();
      assertEquals(x.layer(), y.layer(), what);
      assertEquals(x.pos0(), y.pos0(), what);
      if (!Arrays.equals(x.lists(), y.lists())) moved++;
    }
    for (int i = 0; i < a.ts.size(); i++) {
      SelectionProbe.TokenSelect x = a.ts.get(i), y = b.ts.get(i);
      int rows = (int) Math.max(0, Math.min(x.rows(), (long) SelectionReference.firstTokenSelectDivergence(a.ts, b.ts, i)
          - x.pos0()));
      compared += rows;
      assertArrayEquals(Arrays.copyOf(x.queries(), rows * qRow), Arrays.copyOf(y.queries(), rows * qRow),
          "layer " + x.layer() + " at " + x.pos0() + ": the first " + rows + " rows' queries");
      differAbove |= !Arrays.equals(x.queries(), y.queries());
    }
    assertTrue(moved > 0 && moved < a.ts.size(), "some selections moved: " + moved + " of " + a.ts.size());
    assertTrue(compared > 0 && differAbove, "queries compared over " + compared + " rows; some later ones differ");
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
