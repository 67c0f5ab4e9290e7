package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.model.Rope;

/**
 * Test support: the CPU's {@link ListAttention} (package-private) behind the GPU API's semantics
 * (cuda/kernels/ListKernels.attend), so the GPU parity test compares against the very code the CPU policies
 * call. Layer 0 of the cache; throws what ListAttention throws.
 */
public final class ListAttentionRef {
  private ListAttentionRef() {}

  /**
   * out (n, nHeads, d) f32: row i, head h attends to entries [0, listLen - n + i + 1) of list
   * (nLists == 1 ? 0 : h / group) of lists (nLists, listLen); q (n, nHeads, d) already rotated;
   * compact keys are kv.keys rotated at their list index, else kv.ropedKeys; kv.logitBias[0] applies.
   */
  public static float[] attend(KvCache kv, Rope rope, float[] q, int[] lists, int nLists, int listLen, int n,
                               int nHeads, boolean compact, float scale) {
    int nKv = kv.nKvHeads(), d = kv.kvDim / nKv, group = nHeads / nKv;
    float[] out = new float[n * nHeads * d];
    float[] keyBuf = null;
    if (compact) {
      ListAttention.RopeTable table = new ListAttention.RopeTable(rope);
      table.ensure(listLen);
      keyBuf = new float[nKv * listLen * d];
      for (int g = 0; g < nKv; g++) {
        ListAttention.gatherCompact(0, g, lists, (nLists == 1 ? 0 : g) * listLen, listLen, kv, table, keyBuf,
            g * listLen * d);
      }
    }
    for (int i = 0; i < n; i++) {
      int count = listLen - n + i + 1;
      for (int h = 0; h < nHeads; h++) {
        int g = h / group;
        ListAttention.attend(0, h, q, (i * nHeads + h) * d, lists, (nLists == 1 ? 0 : g) * listLen, count, keyBuf,
            g * listLen * d, kv, out, (i * nHeads + h) * d, scale);
      }
    }
    return out;
  }
}
