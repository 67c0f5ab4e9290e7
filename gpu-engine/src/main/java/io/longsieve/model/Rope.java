package io.longsieve.model;

/**
 * Rotary position embedding in the "rotate half" layout transformers uses for Llama-family models:
 * element i of a head pairs with element i + headDim/2. Frequencies follow the config, llama3
 * scaling included, computed in fp32 as transformers does so that positions agree to the last bit
 * that matters.
 */
public final class Rope {

  private final int headDim;
  private final float[] invFreq; // (headDim / 2)

  public Rope(ModelConfig c) {
    this.headDim = c.headDim();
    this.invFreq = inverseFrequencies(c.headDim(), c.ropeTheta(), c.ropeScaling());
  }

  public int headDim() {
    return headDim;
  }

  /** A copy of the inverse frequencies (headDim / 2), the table GPU kernels rotate with. */
  public float[] inverseFrequencies() {
    return invFreq.clone();
  }

  static float[] inverseFrequencies(int headDim, double theta, RopeScaling s) {
    int half = headDim / 2;
    float[] f = new float[half];
    for (int i = 0; i < half; i++) {
      float exponent = (float) (2 * i) / headDim;
      f[i] = (float) (1.0 / (float) Math.pow(theta, exponent));
    }
    if (!s.isLlama3()) return f;
    double lowWavelen = s.originalMaxPositions() / s.lowFreqFactor();
    double highWavelen = s.originalMaxPositions() / s.highFreqFactor();
    for (int i = 0; i < half; i++) {
      double wavelen = 2 * Math.PI / f[i];
      if (wavelen < highWavelen) continue;
      if (wavelen > lowWavelen) {
        f[i] = (float) (f[i] / s.factor());
      } else {
        double smooth = (s.originalMaxPositions() / wavelen - s.lowFreqFactor()) / (s.highFreqFactor() - s.lowFreqFactor());
        f[i] = (float) ((1 - smooth) * f[i] / s.factor() + smooth * f[i]);
      }
    }
    return f;
  }

  /** cos and sin of every frequency at {@code pos}, into arrays of headDim / 2. */
  public void angles(int pos, float[] cos, float[] sin) {
    for (int i = 0; i < invFreq.length; i++) {
      float a = (float) pos * invFreq[i];
      cos[i] = (float) Math.cos(a);
      sin[i] = (float) Math.sin(a);
    }
  }

  /** Rotates {@code heads} consecutive head vectors starting at v[off] by the given angles. */
  public void apply(float[] v, int off, int heads, float[] cos, float[] sin) {
    int half = headDim / 2;
    for (int h = 0; h < heads; h++) {
      int b = off + h * headDim;
      for (int i = 0; i < half; i++) {
        float x1 = v[b + i], x2 = v[b + half + i];
        v[b + i] = x1 * cos[i] - x2 * sin[i];
        v[b + half + i] = x2 * cos[i] + x1 * sin[i];
      }
    }
  }

  /** Convenience for tests and cold paths: rotate at {@code pos} (allocates). */
  public void rotate(float[] v, int off, int heads, int pos) {
    float[] c = new float[headDim / 2], s = new float[headDim / 2];
    angles(pos, c, s);
    apply(v, off, heads, c, s);
  }
}
