package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.CpuOps;
import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.model.Rope;
import java.util.Arrays;

/**
 * Attention of one query head over a list of cache slots, the kernel every sparse policy ends in:
 * {@code softmax(q·Kᵀ·scale + bias)·V} restricted to the list. Keys come either from the cache's
 * keys rotated at their original positions, or from a caller-filled buffer of keys rotated at
 * their index in the list (compact positions, TokenSelect's and StreamingLLM's re-positioning).
 * Values and the per-slot, per-query-head logit bias always come from the cache.
 */
final class ListAttention {
  private ListAttention() {}

  /**
   * One head's output over list entries [0, count).
   *
   * @param h       the query head: it reads KV head h / group and the bias of (slot, h)
   * @param qr      rotated query, headDim values from qo
   * @param slots   cache slots of the list, from so
   * @param keyBuf  null: keys are {@code kv.ropedKeys} at each slot; else (count, headDim) rows from kbo,
   *                entry i already rotated at its list position
   */
  static void attend(int layer, int h, float[] qr, int qo, int[] slots, int so, int count, float[] keyBuf, int kbo,
                     KvCache kv, float[] out, int oo, float scale) {
    int d = kv.kvDim / kv.nKvHeads(), heads = kv.nHeads(), kvh = h / (heads / kv.nKvHeads());
    float[] scores = DenseAttention.scratch(count);
    float[] keys = kv.ropedKeys[layer];
    float[] bias = kv.logitBias[layer];
    for (int i = 0; i < count; i++) {
      int slot = slots[so + i];
      float v = keyBuf == null ? CpuOps.dot(qr, qo, keys, slot * kv.kvDim + kvh * d, d)
          : CpuOps.dot(qr, qo, keyBuf, kbo + i * d, d);
      v *= scale;
      if (bias != null) v += bias[slot * heads + h];
      scores[i] = v;
    }
    CpuOps.softmax(scores, 0, count);
    Arrays.fill(out, oo, oo + d, 0f);
    float[] values = kv.values[layer];
    for (int i = 0; i < count; i++) CpuOps.axpy(scores[i], values, slots[so + i] * kv.kvDim + kvh * d, out, oo, d);
    if (kv.attended != null) kv.attended.attended(layer, oo / d, slots, so, count); // evaluation runs only
  }

  /**
   * Copies the pre-RoPE keys of KV head kvh at slots[so .. so+count) into dst (count, headDim) and
   * rotates row i at position i: the compact positions of a selected list. The caller has
   * called {@code rope.ensure(count)} (the table is not thread-safe to grow).
   */
  static void gatherCompact(int layer, int kvh, int[] slots, int so, int count, KvCache kv, RopeTable rope,
                            float[] dst, int dstOff) {
    int d = kv.kvDim / kv.nKvHeads();
    float[] keys = kv.keys[layer];
    for (int i = 0; i < count; i++) {
      System.arraycopy(keys, slots[so + i] * kv.kvDim + kvh * d, dst, dstOff + i * d, d);
      rope.rotate(dst, dstOff + i * d, i);
    }
  }

  /**
   * cos/sin of every position up to a bound, computed once per request so compact RoPE is a table
   * lookup. It follows the RoPE table of the call ({@link #use}): layers of another kind, or a
   * length-dependent scaling that moved on (dynamic NTK, LongRoPE), start it afresh.
   */
  static final class RopeTable {
    private Rope rope;
    private int half;                   // rotaryDim / 2
    private float[] cos = new float[0]; // (positions, rotaryDim / 2) times the attention factor
    private float[] sin = new float[0]; // (positions, rotaryDim / 2)
    private int positions;

    RopeTable(Rope rope) {
      use(rope);
    }

    /** Rotates with {@code r} from now on (a no-op when it already does). */
    void use(Rope r) {
      if (r == rope) return;
      rope = r;
      half = r.rotaryDim() / 2;
      positions = 0;
    }

    void ensure(int n) {
      if (n <= positions) return;
      int m = Math.max(n, positions * 2);
      float[] c = Arrays.copyOf(cos, m * half), s = Arrays.copyOf(sin, m * half);
      float[] tc = new float[half], ts = new float[half];
      for (int p = positions; p < m; p++) {
        rope.angles(p, tc, ts);
        System.arraycopy(tc, 0, c, p * half, half);
        System.arraycopy(ts, 0, s, p * half, half);
      }
      cos = c;
      sin = s;
      positions = m;
    }

    /** Rotates one head vector v[off .. off+headDim) at pos (the rotate-half math of {@link Rope#apply}). */
    void rotate(float[] v, int off, int pos) {
      rope.apply(v, off, 1, cos, sin, pos * half);
    }
  }
}
