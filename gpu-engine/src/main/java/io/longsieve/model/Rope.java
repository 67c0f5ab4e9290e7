package io.longsieve.model;

/**
 * Rotary position embedding in the "rotate half" layout transformers uses: element i of a head pairs
 * with element i + rotaryDim/2, for i below rotaryDim/2; elements from rotaryDim on pass through
 * (partial rotary, Phi-4-mini). The one place the engine turns config.json's RoPE into numbers: the
 * inverse frequencies of every scaling type ({@link RopeScaling}) and the factor cos and sin are
 * multiplied by (YaRN, LongRoPE), computed in fp32 in the order current transformers computes them
 * (modeling_rope_utils.py), so positions agree to the last bit that matters. The CPU backend rotates
 * with {@link #angles} and {@link #apply}; the CUDA backend uploads {@link #deviceInverseFrequencies}
 * and lays out q and k by {@link #deviceDimOrder} and {@link #attentionFactor}.
 *
 * <p>Dynamic NTK and LongRoPE depend on how far a forward call reaches: {@link #atLength} gives the
 * table for a call whose last position is {@code length - 1}, as transformers recomputes it per
 * call (a prefill is one call over the whole prompt, each decode step one call). Keys already cached
 * keep the rotation of the call that appended them, as in transformers' cache.
 */
public final class Rope {

  private final int headDim;
  private final int rotaryDim;       // rotated elements of a head (headDim unless partial)
  private final double theta;
  private final RopeScaling scaling;
  private final int maxPositions;    // config max_position_embeddings: dynamic NTK's reference length
  private final float[] invFreq;     // (rotaryDim / 2)
  private final float attention;     // cos and sin are multiplied by this (YaRN, LongRoPE); 1 otherwise
  private final Rope base;           // the table at the config's own length (this, for it)
  private volatile Rope longTable;   // LongRoPE's long-factor table, made on first use (on the base)

  /** The RoPE of the model's full-attention layers (every layer, for most models). */
  public Rope(ModelConfig c) {
    this(c.headDim(), c.rotaryDim(), c.ropeTheta(), c.ropeScaling(), c.maxPositions());
  }

  /** The RoPE layer {@code layer} rotates with (Gemma 3's sliding layers have their own base). */
  public static Rope forLayer(ModelConfig c, int layer) {
    LayerKind k = c.layerKind(layer);
    return new Rope(c.headDim(), c.rotaryDim(), k.ropeTheta(), k.ropeScaling(), c.maxPositions());
  }

  public Rope(int headDim, int rotaryDim, double theta, RopeScaling scaling, int maxPositions) {
    this(headDim, rotaryDim, theta, scaling, maxPositions, 0, null);
  }

  /** length 0: the table at the config's own length; else the one for a call reaching {@code length}. */
  private Rope(int headDim, int rotaryDim, double theta, RopeScaling scaling, int maxPositions, int length, Rope base) {
    if (rotaryDim <= 0 || rotaryDim % 2 != 0 || rotaryDim > headDim) {
      throw new IllegalArgumentException("rotary dimension " + rotaryDim + " must be even and in (0, " + headDim + "]");
    }
    this.headDim = headDim;
    this.rotaryDim = rotaryDim;
    this.theta = theta;
    this.scaling = scaling;
    this.maxPositions = maxPositions;
    this.invFreq = frequencies(rotaryDim, theta, scaling, maxPositions, length);
    this.attention = (float) scaling.attentionFactor();
    this.base = base == null ? this : base;
  }

  public int headDim() {
    return headDim;
  }

  public int rotaryDim() {
    return rotaryDim;
  }

  public RopeScaling scaling() {
    return scaling;
  }

  /** The factor cos and sin are multiplied by (YaRN's and LongRoPE's attention factor; 1 otherwise). */
  public float attentionFactor() {
    return attention;
  }

  /** A copy of the inverse frequencies (rotaryDim / 2). */
  public float[] inverseFrequencies() {
    return invFreq.clone();
  }

  /** Whether {@link #atLength} can give another table than this one. */
  public boolean dependsOnLength() {
    return scaling.dependsOnLength();
  }

  /**
   * The table for a forward call whose last position is {@code length - 1}: dynamic NTK rescales the
   * base once the call reaches past max_position_embeddings, LongRoPE switches to its long factors
   * past original_max_position_embeddings; the other types have one table whatever the length.
   */
  public Rope atLength(int length) {
    Rope b = base;
    switch (scaling.type()) {
      case "dynamic":
        return length > maxPositions ? new Rope(headDim, rotaryDim, theta, scaling, maxPositions, length, b) : b;
      case "longrope":
        if (length <= scaling.originalMaxPositions()) return b;
        Rope t = b.longTable;
        if (t == null) {
          t = new Rope(headDim, rotaryDim, theta, scaling, maxPositions, length, b);
          b.longTable = t;  // a benign race: both threads compute the same table
        }
        return t;
      default:
        return b;
    }
  }

  /** The inverse frequencies of the config's own table (rotary dimension {@code dim}), for tests. */
  static float[] inverseFrequencies(int dim, double theta, RopeScaling s) {
    return frequencies(dim, theta, s, Integer.MAX_VALUE, 0);
  }

  private static float[] frequencies(int dim, double theta, RopeScaling s, int maxPositions, int length) {
    int half = dim / 2;
    float[] f = new float[half];
    float[] exponent = new float[half];  // arange(0, dim, 2).float() / dim, in fp32
    for (int i = 0; i < half; i++) exponent[i] = (float) (2 * i) / dim;
    switch (s.type()) {
      case "longrope": {
        java.util.List<Double> ext = length > s.originalMaxPositions() ? s.longFactor() : s.shortFactor();
        for (int i = 0; i < half; i++) {
          f[i] = (float) (1.0 / (ext.get(i).floatValue() * (float) Math.pow(theta, exponent[i])));
        }
        return f;
      }
      case "dynamic": {
        float base = (float) theta;
        if (length > maxPositions) {  // transformers computes this in fp32 from the length tensor
          float t = (float) s.factor() * (float) length / (float) maxPositions - (float) (s.factor() - 1);
          base = (float) theta * (float) Math.pow(t, (float) ((double) dim / (dim - 2)));
        }
        for (int i = 0; i < half; i++) f[i] = (float) (1.0 / (float) Math.pow(base, exponent[i]));
        return f;
      }
      case "yarn":
        return yarn(dim, theta, s, exponent);
      default:
        break;
    }
    for (int i = 0; i < half; i++) f[i] = (float) (1.0 / (float) Math.pow(theta, exponent[i]));
    if (s.type().equals("linear")) {
      for (int i = 0; i < half; i++) f[i] = f[i] / (float) s.factor();
    } else if (s.isLlama3()) {
      llama3(f, s);
    }
    return f;
  }

  private static void llama3(float[] f, RopeScaling s) {
    double lowWavelen = s.originalMaxPositions() / s.lowFreqFactor();
    double highWavelen = s.originalMaxPositions() / s.highFreqFactor();
    for (int i = 0; i < f.length; i++) {
      double wavelen = 2 * Math.PI / f[i];
      if (wavelen < highWavelen) continue;
      if (wavelen > lowWavelen) {
        f[i] = (float) (f[i] / s.factor());
      } else {
        double smooth = (s.originalMaxPositions() / wavelen - s.lowFreqFactor()) / (s.highFreqFactor() - s.lowFreqFactor());
        f[i] = (float) ((1 - smooth) * f[i] / s.factor() + smooth * f[i]);
      }
    }
  }

  /**
   * YaRN (_compute_yarn_parameters): the extrapolated (plain) and interpolated ({@code / factor})
   * frequencies blended by a linear ramp over the dimensions between the correction range's bounds,
   * the dimensions that turn {@code betaFast} and {@code betaSlow} times over the original length.
   */
  private static float[] yarn(int dim, double theta, RopeScaling s, float[] exponent) {
    int half = dim / 2;
    double low = correctionDim(s.betaFast(), dim, theta, s.originalMaxPositions());
    double high = correctionDim(s.betaSlow(), dim, theta, s.originalMaxPositions());
    if (s.truncate()) {
      low = Math.floor(low);
      high = Math.ceil(high);
    }
    low = Math.max(low, 0);
    high = Math.min(high, dim - 1);
    if (low == high) high += 0.001;  // transformers' guard against a zero-width ramp
    float[] f = new float[half];
    for (int i = 0; i < half; i++) {
      float pos = (float) Math.pow(theta, exponent[i]);
      float extrapolation = 1f / pos;
      float interpolation = 1f / ((float) s.factor() * pos);
      float ramp = Math.min(1f, Math.max(0f, ((float) i - (float) low) / (float) (high - low)));
      float extrapolationShare = 1f - ramp;
      f[i] = interpolation * (1f - extrapolationShare) + extrapolation * extrapolationShare;
    }
    return f;
  }

  /** The dimension that turns {@code rotations} times over {@code positions} (YaRN's inverse dimension formula). */
  private static double correctionDim(double rotations, int dim, double theta, int positions) {
    return dim * Math.log(positions / (rotations * 2 * Math.PI)) / (2 * Math.log(theta));
  }

  /** cos and sin of every frequency at {@code pos} times the attention factor, into the first rotaryDim / 2 of each array. */
  public void angles(int pos, float[] cos, float[] sin) {
    for (int i = 0; i < invFreq.length; i++) {
      float a = (float) pos * invFreq[i];
      cos[i] = (float) Math.cos(a) * attention;
      sin[i] = (float) Math.sin(a) * attention;
    }
  }

  /** Rotates {@code heads} consecutive head vectors starting at v[off] by the given angles. */
  public void apply(float[] v, int off, int heads, float[] cos, float[] sin) {
    apply(v, off, heads, cos, sin, 0);
  }

  /** As {@link #apply(float[], int, int, float[], float[])} with the angles at cos[at], sin[at] (a table row). */
  public void apply(float[] v, int off, int heads, float[] cos, float[] sin, int at) {
    int half = rotaryDim / 2;
    for (int h = 0; h < heads; h++) {
      int b = off + h * headDim;
      for (int i = 0; i < half; i++) {
        float x1 = v[b + i], x2 = v[b + half + i];
        v[b + i] = x1 * cos[at + i] - x2 * sin[at + i];
        v[b + half + i] = x2 * cos[at + i] + x1 * sin[at + i];
      }
    }
  }

  /** Convenience for tests and cold paths: rotate at {@code pos} (allocates). */
  public void rotate(float[] v, int off, int heads, int pos) {
    float[] c = new float[headDim / 2], s = new float[headDim / 2];
    angles(pos, c, s);
    apply(v, off, heads, c, s);
  }

  /**
   * The GPU kernels rotate every pair (i, i + headDim/2) with a table of headDim / 2 frequencies.
   * A partial rotary head becomes one of those when its elements are laid out in
   * {@link #deviceDimOrder} and the frequencies of the pass-through pairs are 0 (cos 1, sin 0: the
   * identity): this table, the rotary frequencies followed by zeros.
   */
  public float[] deviceInverseFrequencies() {
    float[] f = new float[headDim / 2];
    System.arraycopy(invFreq, 0, f, 0, invFreq.length);
    return f;
  }

  /**
   * The element order of a head in the CUDA backend's q and k: device element j holds element
   * order[j] of transformers' head. The rotary pairs (i, i + rotaryDim/2) land on (i, i + headDim/2)
   * and the pass-through elements fill the other pairs, which {@link #deviceInverseFrequencies}
   * leaves unrotated. Attention logits q·k do not change under one order applied to both, and
   * values are not reordered, so the attention output is transformers' own. The identity when the
   * whole head rotates.
   */
  public int[] deviceDimOrder() {
    int d = headDim, r = rotaryDim, pass = (d - r) / 2;
    int[] order = new int[d];
    for (int i = 0; i < r / 2; i++) {
      order[i] = i;                   // first rotary half
      order[d / 2 + i] = r / 2 + i;   // its partners
    }
    for (int i = 0; i < pass; i++) {
      order[r / 2 + i] = r + i;             // pass-through elements, paired among themselves
      order[d / 2 + r / 2 + i] = r + pass + i;
    }
    return order;
  }
}
