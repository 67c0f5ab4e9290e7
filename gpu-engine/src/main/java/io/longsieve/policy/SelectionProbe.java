package io.longsieve.policy;

import java.util.function.Supplier;

/**
 * Diagnostic hook: while a listener is installed, Token Sparse Attention and TokenSelect on both
 * backends (cpu/policy, cuda/policy) hand it every sparse selection they make, with the inputs the
 * selection was computed from in the form the official code takes them, so the selections can be
 * recomputed by the official code and compared ({@code generate --dump-selections},
 * tools/gpu_host/official_crosscheck.py, docs/sparse-policies.md). Dense blocks report nothing.
 * Off in production: one volatile read per selection; on the GPU also one per decode step, as a step
 * runs its launches eagerly (not from a CUDA graph) while a listener is installed so that every
 * selection is seen. A report is built only with a listener installed; the GPU reads its buffers
 * back for it (synchronising). One listener at a time; the reports come on the engine's thread.
 */
public final class SelectionProbe {
  private SelectionProbe() {}

  /** Receives the selections; arrays are the listener's to keep, keys suppliers are valid during the call only. */
  public interface Listener {
    void tsa(Tsa s);

    void tokenSelect(TokenSelect s);
  }

  /**
   * One TSA selection: a sparse layer and prefill chunk of {@code rows} queries whose cache holds
   * slots [0, end) (the chunk's own keys last); the proxy window is its last w rows.
   *
   * @param queries (w, heads, headDim) f32 the window's queries rotated at their positions
   * @param keys    supplies (end, kvHeads, headDim) f32 the keys rotated at their positions
   * @param scores  (heads, end - w) f32 the engine's pooled proxy mass per prefix slot (what it ranks)
   * @param lists   (heads, keep + w) selected slots per query head, ascending, the window last
   */
  public record Tsa(int layer, int pos0, int rows, int end, int w, int heads, float[] queries, Supplier<float[]> keys,
                    float[] scores, int[] lists) {
    public int keep() {
      return lists.length / heads - w;
    }
  }

  /**
   * One TokenSelect selection: a prefill sub-chunk or a decode step of {@code rows} queries at
   * positions pos0.. whose last row sees slots [0, end).
   *
   * @param queries (rows, heads, headDim) f32 the block's queries before RoPE
   * @param keys    supplies (end, kvHeads, headDim) f32 the keys before RoPE
   * @param votes   (lists, cands) f32 the engine's soft votes per candidate slot sinks + c, before pooling
   * @param lists   (lists, listLen) the slots attended: sinks ++ top-k ascending ++ local window
   */
  public record TokenSelect(int layer, int pos0, int rows, int end, boolean decode, int listCount, float[] queries,
                            Supplier<float[]> keys, float[] votes, int[] lists) {}

  private static volatile Listener listener;

  /** Installs {@code l} (null removes it). */
  public static void install(Listener l) {
    listener = l;
  }

  /** Whether a listener is installed (the implementations build no report otherwise). */
  public static boolean active() {
    return listener != null;
  }

  /** Hands a TSA selection to the listener; a no-op without one. */
  public static void report(Tsa s) {
    Listener l = listener;
    if (l != null) l.tsa(s);
  }

  /** Hands a TokenSelect selection to the listener; a no-op without one. */
  public static void report(TokenSelect s) {
    Listener l = listener;
    if (l != null) l.tokenSelect(s);
  }
}
