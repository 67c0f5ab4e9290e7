package io.longsieve.cpu.policy;

/**
 * One pool thread's buffers for rotating a single head's query: a copy of the query and the cos/sin
 * of its position. Attention loops run once per layer and decode step on every worker thread, so
 * they borrow these instead of allocating three arrays per call. A thread uses one set at a time.
 */
final class RotationScratch {

  private static final ThreadLocal<RotationScratch> LOCAL = new ThreadLocal<>();

  final float[] qr;   // (headDim) query being rotated
  final float[] cos;  // (headDim / 2)
  final float[] sin;  // (headDim / 2)

  private RotationScratch(int headDim) {
    qr = new float[headDim];
    cos = new float[headDim / 2];
    sin = new float[headDim / 2];
  }

  /** This thread's buffers for head size d (new ones when a model of another head size ran here last). */
  static RotationScratch of(int d) {
    RotationScratch s = LOCAL.get();
    if (s == null || s.qr.length != d) {
      s = new RotationScratch(d);
      LOCAL.set(s);
    }
    return s;
  }
}
