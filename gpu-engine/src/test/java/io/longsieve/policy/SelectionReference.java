package io.longsieve.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.function.IntUnaryOperator;

/**
 * The scores a {@link SelectionProbe} report's lists come from, recomputed in fp64 from the report's
 * inputs alone the way the official code computes them, and the checks the probe tests (CPU and GPU)
 * share: the reported scores match, the lists are their top with the rule-kept parts around them.
 */
public final class SelectionReference {
  private SelectionReference() {}

  /** Collects a run's reports, each with its keys read during the call (as the dump does). */
  public static final class Recorder implements SelectionProbe.Listener {
    public final List<SelectionProbe.Tsa> tsa = new ArrayList<>();
    public final List<SelectionProbe.TokenSelect> ts = new ArrayList<>();
    public final List<float[]> tsaKeys = new ArrayList<>(), tsKeys = new ArrayList<>();

    @Override
    public void tsa(SelectionProbe.Tsa s) {
      tsa.add(s);
      tsaKeys.add(s.keys().get());
    }

    @Override
    public void tokenSelect(SelectionProbe.TokenSelect s) {
      ts.add(s);
      tsKeys.add(s.keys().get());
    }

    /**
     * The reports (with their keys) in position order: by first position, then layer. The order a
     * backend reports in follows its forward chunks (the CPU runs every layer over one prefill chunk, 2048
     * tokens by default, before the next chunk, the GPU's chunk is at least 4096), which selects nothing differently:
     * TSA selects per tsa:chunk and TokenSelect per sub-chunk on both (PolicySpec.prefillChunk), and
     * each (position, layer) selects once.
     */
    public Recorder inPositionOrder() {
      Recorder r = new Recorder();
      Integer[] o = order(tsa.size(), i -> tsa.get(i).pos0(), i -> tsa.get(i).layer());
      for (int i : o) {
        r.tsa.add(tsa.get(i));
        r.tsaKeys.add(tsaKeys.get(i));
      }
      o = order(ts.size(), i -> ts.get(i).pos0(), i -> ts.get(i).layer());
      for (int i : o) {
        r.ts.add(ts.get(i));
        r.tsKeys.add(tsKeys.get(i));
      }
      return r;
    }

    private static Integer[] order(int n, IntUnaryOperator pos, IntUnaryOperator layer) {
      Integer[] o = new Integer[n];
      for (int i = 0; i < n; i++) o[i] = i;
      Arrays.sort(o, Comparator.<Integer>comparingInt(pos::applyAsInt).thenComparingInt(layer::applyAsInt));
      return o;
    }
  }

  /**
   * The lowest slot whose hidden state entering report i's layer may differ between two runs of the
   * same TSA policy whose reports a and b (position order) selected differently before it
   * (Integer.MAX_VALUE: none). TSA is causal: a chunk's row j reads only its head's list entries up
   * to j, and is zero in that head when j is not in the list; so a report of an earlier layer whose
   * lists differ first at slot j changes the rows of its chunk from max(j, the chunk's first slot)
   * on, and below the lowest such slot both runs computed the same thing: another run's keys are a
   * reference there and not above (one token that crosses the keep cut-off changes its own row by a
   * whole head's output, SelectionProbeTest#tsaKeysAgreeBelowTheFirstSlotAnEarlierSelectionMoved).
   */
  public static int firstTsaDivergence(List<SelectionProbe.Tsa> a, List<SelectionProbe.Tsa> b, int i) {
    int first = Integer.MAX_VALUE;
    for (int k = 0; k < a.size(); k++) {
      SelectionProbe.Tsa x = a.get(k), y = b.get(k);
      if (x.layer() >= a.get(i).layer()) continue; // computed from this layer's inputs, or after
      int lx = x.lists().length / x.heads(), ly = y.lists().length / y.heads(), before = x.end() - x.rows();
      for (int h = 0; h < x.heads(); h++) {
        boolean[] inX = new boolean[x.end()], inY = new boolean[x.end()];
        for (int e = 0; e < lx; e++) inX[x.lists()[h * lx + e]] = true;
        for (int e = 0; e < ly; e++) inY[y.lists()[h * ly + e]] = true;
        for (int j = 0; j < x.end(); j++) {
          if (inX[j] != inY[j]) {
            first = Math.min(first, Math.max(j, before));
            break;
          }
        }
      }
    }
    return first;
  }

  /**
   * The lowest position whose hidden state entering report i's layer may differ between two runs of
   * the same TokenSelect policy whose reports a and b (position order) selected differently before
   * it: the first position of a block of an earlier layer whose lists differ (Integer.MAX_VALUE:
   * none). A block's lists change its own rows, and through their keys and values only later rows.
   */
  public static int firstTokenSelectDivergence(List<SelectionProbe.TokenSelect> a, List<SelectionProbe.TokenSelect> b,
                                               int i) {
    int first = Integer.MAX_VALUE;
    for (int k = 0; k < a.size(); k++) {
      SelectionProbe.TokenSelect x = a.get(k), y = b.get(k);
      if (x.layer() < a.get(i).layer() && !Arrays.equals(x.lists(), y.lists())) first = Math.min(first, x.pos0());
    }
    return first;
  }

  /**
   * TSA (official get_index): per head, the mean softmax(q·k/√d) probability of each prefix slot over the
   * w window queries (query r sees slots [0, prefix + r]), avg-pooled (kernel pool, padding pool/2, zeros
   * counted); (heads, prefix). keys: (end, kvHeads, headDim) rotated.
   */
  public static double[] tsaScores(SelectionProbe.Tsa s, float[] keys, ModelConfig c, int pool) {
    int heads = c.numHeads(), kvDim = c.kvDim(), d = c.headDim(), w = s.w(), prefix = s.end() - w;
    double[] out = new double[heads * prefix];
    for (int h = 0; h < heads; h++) {
      double[] mass = new double[prefix];
      for (int r = 0; r < w; r++) {
        double[] p = new double[prefix + r + 1];
        for (int j = 0; j < p.length; j++) {
          p[j] = dot(s.queries(), (r * heads + h) * d, keys, j * kvDim + (h / c.group()) * d, d) / Math.sqrt(d);
        }
        softmax(p);
        for (int j = 0; j < prefix; j++) mass[j] += p[j] / w;
      }
      int k = Math.max(1, pool), pad = k / 2;
      for (int j = 0; j < prefix; j++) {
        double sum = 0;
        for (int t = j - pad; t < j - pad + k; t++) if (t >= 0 && t < prefix) sum += mass[t];
        out[h * prefix + j] = sum / k;
      }
    }
    return out;
  }

  /**
   * TokenSelect (official retrieval_indices, heads=layer): the fingerprint (the block's pre-RoPE queries
   * rotated at local + r, averaged) against the pre-RoPE key of each candidate slot sinks + c, KV head
   * h % nKv (gqaMod) or h / group, no scale; softmax per head, summed over heads; (cands).
   */
  public static double[] tokenSelectVotes(SelectionProbe.TokenSelect s, float[] keys, ModelConfig c, int sinks,
                                          int local, boolean gqaMod) {
    Rope rope = new Rope(c);
    int heads = c.numHeads(), kv = c.numKvHeads(), kvDim = c.kvDim(), d = c.headDim();
    int cands = s.end() - local - sinks;
    float[] cos = new float[d / 2], sin = new float[d / 2];
    double[] qf = new double[heads * d];
    for (int r = 0; r < s.rows(); r++) {
      float[] row = Arrays.copyOfRange(s.queries(), r * heads * d, (r + 1) * heads * d);
      rope.angles(local + r, cos, sin);
      rope.apply(row, 0, heads, cos, sin);
      for (int j = 0; j < row.length; j++) qf[j] += row[j] / (double) s.rows();
    }
    double[] votes = new double[cands];
    for (int h = 0; h < heads; h++) {
      int g = gqaMod ? h % kv : h / c.group();
      double[] p = new double[cands];
      for (int k = 0; k < cands; k++) {
        int ko = (sinks + k) * kvDim + g * d;
        for (int j = 0; j < d; j++) p[k] += qf[h * d + j] * keys[ko + j];
      }
      softmax(p);
      for (int k = 0; k < cands; k++) votes[k] += p[k];
    }
    return votes;
  }

  /** The reported fp32 scores against the fp64 reference: within rel of the largest. */
  public static void assertClose(double[] ref, float[] got, double rel, String what) {
    assertEquals(ref.length, got.length, what + ": length");
    double max = 0, err = 0;
    for (int i = 0; i < ref.length; i++) {
      max = Math.max(max, Math.abs(ref[i]));
      err = Math.max(err, Math.abs(ref[i] - got[i]));
    }
    assertTrue(err <= rel * max, what + ": max error " + err + " of " + max);
  }

  /**
   * list (ascending) holds the top-n of scores[off, off + len): no slot left out scores above a slot
   * taken (ties either way).
   */
  public static void assertTop(float[] scores, int off, int len, int[] list, String what) {
    boolean[] taken = new boolean[len];
    float minTaken = Float.POSITIVE_INFINITY, maxLeft = Float.NEGATIVE_INFINITY;
    for (int i = 0; i < list.length; i++) {
      assertTrue(i == 0 || list[i] > list[i - 1], what + ": ascending, no repeats");
      taken[list[i]] = true;
      minTaken = Math.min(minTaken, scores[off + list[i]]);
    }
    for (int j = 0; j < len; j++) if (!taken[j]) maxLeft = Math.max(maxLeft, scores[off + j]);
    assertTrue(maxLeft <= minTaken, what + ": a slot scoring " + maxLeft + " left out, one scoring " + minTaken + " taken");
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
}
