package io.longsieve.cpu.kernels;

import io.longsieve.model.Rope;
import java.util.Arrays;

/**
 * cos/sin of every position up to a bound, so a rotation is a table lookup instead of rotaryDim
 * calls to cos and sin. Grows on the calling thread ({@link #ensure}, before work is handed to the
 * pool); {@link #rotate} may then run on any thread. Same angles (attention factor included) and
 * rotate-half math, over the rotary dimensions only, as {@link Rope#angles} and {@link Rope#apply},
 * bit for bit.
 */
public final class RopeTable {
  private Rope rope;
  private int half;                            // rotaryDim / 2
  private volatile float[] cos = new float[0]; // (positions, rotaryDim / 2)
  private volatile float[] sin = new float[0]; // (positions, rotaryDim / 2)
  private int positions;

  public RopeTable(Rope rope) {
    use(rope);
  }

  /**
   * Rotates with {@code r} from now on (a no-op when it already does): a policy's table follows the
   * layer it runs for (layers of another kind, or a length-dependent scaling that moved on, start afresh).
   */
  public synchronized void use(Rope r) {
    if (r == rope) return;
    rope = r;
    half = r.rotaryDim() / 2;
    positions = 0;
    cos = new float[0];
    sin = new float[0];
  }

  /** Makes positions [0, n) available. */
  public synchronized void ensure(int n) {
    if (n <= positions) return;
    int m = Math.max(n, positions * 2);
    float[] c = Arrays.copyOf(cos, m * half), s = Arrays.copyOf(sin, m * half);
    float[] tc = new float[half], ts = new float[half];
    for (int p = positions; p < m; p++) {
      rope.angles(p, tc, ts);
      System.arraycopy(tc, 0, c, p * half, half);
      System.arraycopy(ts, 0, s, p * half, half);
    }
    sin = s;
    cos = c;
    positions = m;
  }

  /** Rotates one head vector v[off .. off+headDim) at pos (ensured before); dimensions past rotaryDim pass through. */
  public void rotate(float[] v, int off, int pos) {
    float[] c = cos, s = sin;
    int h = half, t = pos * h;
    for (int i = 0; i < h; i++) {
      float x1 = v[off + i], x2 = v[off + h + i];
      v[off + i] = x1 * c[t + i] - x2 * s[t + i];
      v[off + h + i] = x2 * c[t + i] + x1 * s[t + i];
    }
  }
}
