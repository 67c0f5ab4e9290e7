package io.longsieve.cpu;

import io.longsieve.cpu.kernels.AttendedKeys;
import io.longsieve.cpu.kernels.CpuOps;
import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.engine.spi.AttentionRecall;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import java.util.Arrays;

/**
 * Attention recall of one CPU sequence (evaluation only; {@link AttentionRecall} defines it). Installed
 * as its cache's {@link KvCache#attended}, it learns from the attention kernels which slots each query
 * head attended and maps them to token positions (a compressed cache keeps each slot's original
 * position); {@link CpuModel} hands it each layer's queries, keys and values around the policy's call.
 * It keeps its own copy of every token's keys that no policy compresses, so the dense reference of a
 * probed query is its own q against every key so far (the model's sliding window applied), in the same
 * run: recall is local to the layer, not a comparison of two runs' hidden states.
 */
final class AttentionRecorder implements AttendedKeys {

  private final ModelConfig c;
  private final Rope rope;
  private final KvCache kv;        // the sequence's cache: slots → positions
  private final KvCache shadow;    // every token ever appended, slot = position, never compressed
  private final int[] positions;   // probed query positions, ascending
  private final int heads, d, group;
  // the attention call in progress
  private int callLayer = -1, callPos0;
  private boolean callDecode;
  private int[] probedRows = new int[0];     // chunk rows probed in this call, ascending
  private float[] probedQ = new float[0];    // (probed rows, qDim) their queries before RoPE
  private int[][] attendedPositions = new int[0][]; // (probed rows × heads) positions attended; null: none
  // results
  private final double[] layerSum;    // (layer) Σ recall over probed queries and heads
  private final long[] layerCount;    // (layer)
  private double prefillSum, decodeSum;
  private long prefillCount, decodeCount;
  private final java.util.Set<Integer> prefillSeen = new java.util.TreeSet<>(), decodeSeen = new java.util.TreeSet<>();

  AttentionRecorder(ModelConfig c, Rope rope, KvCache kv, int[] positions) {
    for (int i = 1; i < positions.length; i++) {
      if (positions[i] <= positions[i - 1]) throw new IllegalArgumentException("recall positions must ascend");
    }
    this.c = c;
    this.rope = rope;
    this.kv = kv;
    this.shadow = new KvCache(c, rope, kv.capacity);
    this.positions = positions.clone();
    heads = c.numHeads();
    d = c.headDim();
    group = c.group();
    layerSum = new double[c.numLayers()];
    layerCount = new long[c.numLayers()];
  }

  /** Before the policy attends rows [0, n) at positions pos0.. of layer: keep their keys, values and probed queries. */
  void beforeAttention(int layer, float[] q, float[] k, float[] v, int n, int pos0, boolean decode) {
    if (shadow.length(layer) != pos0) {
      throw new IllegalStateException("attention recall must be recorded from the sequence's first token (layer "
          + layer + " has " + shadow.length(layer) + " tokens, the call starts at " + pos0 + ")");
    }
    shadow.append(layer, k, 0, v, 0, n, pos0);
    int lo = lowerBound(pos0), hi = lowerBound(pos0 + n);
    int m = hi - lo, qDim = c.qDim();
    probedRows = new int[m];
    probedQ = new float[m * qDim];
    for (int i = 0; i < m; i++) {
      probedRows[i] = positions[lo + i] - pos0;
      System.arraycopy(q, probedRows[i] * qDim, probedQ, i * qDim, qDim);
    }
    attendedPositions = new int[m * heads][];
    callLayer = layer;
    callPos0 = pos0;
    callDecode = decode;
  }

  @Override
  public void attended(int layer, int rowHead, int[] slots, int off, int count) {
    int at = probedIndex(layer, rowHead);
    if (at < 0) return;
    int kvh = (rowHead % heads) / group;
    int[] p = new int[count];
    for (int i = 0; i < count; i++) p[i] = kv.position(layer, slots[off + i], kvh);
    attendedPositions[at] = p;
  }

  @Override
  public void attendedRange(int layer, int rowHead, int from, int to) {
    int at = probedIndex(layer, rowHead);
    if (at < 0) return;
    int kvh = (rowHead % heads) / group;
    int[] p = new int[to - from];
    for (int s = from; s < to; s++) p[s - from] = kv.position(layer, s, kvh);
    attendedPositions[at] = p;
  }

  /** Index into attendedPositions of (row, head), or -1 when the row is not probed. */
  private int probedIndex(int layer, int rowHead) {
    if (layer != callLayer) return -1;
    int i = Arrays.binarySearch(probedRows, rowHead / heads);
    return i < 0 ? -1 : i * heads + rowHead % heads;
  }

  /** After the policy's call: the recall of each probed (row, head) against dense attention over every key so far. */
  void afterAttention(int layer) {
    float scale = (float) (1.0 / Math.sqrt(d));
    float[] qr = new float[d], cos = new float[d / 2], sin = new float[d / 2];
    for (int r = 0; r < probedRows.length; r++) {
      int pos = callPos0 + probedRows[r];
      int end = pos + 1;
      int start = c.slidingWindow() > 0 ? Math.max(0, end - c.slidingWindow()) : 0;
      double[] prob = new double[end - start];
      rope.angles(pos, cos, sin);
      for (int h = 0; h < heads; h++) {
        System.arraycopy(probedQ, r * c.qDim() + h * d, qr, 0, d);
        rope.apply(qr, 0, 1, cos, sin);
        int kvh = h / group;
        double max = Double.NEGATIVE_INFINITY;
        for (int s = start; s < end; s++) {
          double v = CpuOps.dot(qr, 0, shadow.ropedKeys[layer], s * c.kvDim() + kvh * d, d) * scale;
          prob[s - start] = v;
          max = Math.max(max, v);
        }
        double z = 0;
        for (int i = 0; i < prob.length; i++) z += prob[i] = Math.exp(prob[i] - max);
        double recall = 0;
        int[] got = attendedPositions[r * heads + h];
        if (got != null) {
          for (int p : got) if (p >= start && p < end) recall += prob[p - start] / z;
        }
        add(layer, Math.min(1.0, recall), pos);
      }
    }
    callLayer = -1;
  }

  private void add(int layer, double recall, int pos) {
    layerSum[layer] += recall;
    layerCount[layer]++;
    if (callDecode) {
      decodeSum += recall;
      decodeCount++;
      decodeSeen.add(pos);
    } else {
      prefillSum += recall;
      prefillCount++;
      prefillSeen.add(pos);
    }
  }

  /** First index of positions at or above pos. */
  private int lowerBound(int pos) {
    int i = Arrays.binarySearch(positions, pos);
    if (i >= 0) return i;
    return -i - 1;
  }

  AttentionRecall result() {
    double[] byLayer = new double[layerSum.length];
    for (int l = 0; l < byLayer.length; l++) byLayer[l] = layerCount[l] == 0 ? Double.NaN : layerSum[l] / layerCount[l];
    return new AttentionRecall(byLayer, prefillCount == 0 ? Double.NaN : prefillSum / prefillCount,
        decodeCount == 0 ? Double.NaN : decodeSum / decodeCount, prefillSeen.size(), decodeSeen.size());
  }
}
