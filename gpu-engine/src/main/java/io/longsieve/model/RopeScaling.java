package io.longsieve.model;

import java.util.List;

/**
 * A RoPE frequency scaling as config.json names it ({@code rope_scaling} in transformers 4.x,
 * {@code rope_parameters} in 5.x), with every default resolved the way current transformers resolves
 * it (modeling_rope_utils.py, standardize_rope_params); {@link #NONE} for plain RoPE. {@link Rope}
 * turns it into frequencies; this record only holds the numbers.
 *
 * <ul>
 *   <li>{@code llama3}: frequencies with a wavelength above {@code originalMaxPositions / lowFreqFactor}
 *       are divided by {@code factor}, those below {@code originalMaxPositions / highFreqFactor} kept,
 *       the band between interpolated.
 *   <li>{@code linear}: every frequency divided by {@code factor}.
 *   <li>{@code dynamic}: NTK scaling of the base, recomputed from the length of each forward call
 *       once it passes {@code max_position_embeddings} (the config's, held by the model config).
 *   <li>{@code yarn}: a blend of the plain and the interpolated ({@code / factor}) frequencies by a
 *       ramp between the dimensions that turn {@code betaFast} and {@code betaSlow} times over
 *       {@code originalMaxPositions}; cos and sin multiplied by {@code attentionFactor}.
 *   <li>{@code longrope}: frequencies divided by {@code shortFactor} while a call stays within
 *       {@code originalMaxPositions}, by {@code longFactor} beyond; cos and sin multiplied by
 *       {@code attentionFactor} either way.
 * </ul>
 *
 * @param type                 default | linear | dynamic | yarn | longrope | llama3
 * @param factor               the context multiple (all but default)
 * @param lowFreqFactor        llama3
 * @param highFreqFactor       llama3
 * @param originalMaxPositions llama3, yarn, longrope: the pretraining length
 * @param attentionFactor      yarn, longrope: cos and sin are multiplied by it (already resolved from
 *                             the type's default when config.json leaves it out); 1 for the others
 * @param betaFast             yarn: rotations that bound extrapolation (default 32)
 * @param betaSlow             yarn: rotations that bound interpolation (default 1)
 * @param truncate             yarn: the correction range rounded outwards to whole dimensions (default true)
 * @param shortFactor          longrope: one divisor per rotary frequency (rotaryDim / 2), else empty
 * @param longFactor           longrope: as shortFactor, for calls beyond originalMaxPositions
 */
public record RopeScaling(String type, double factor, double lowFreqFactor, double highFreqFactor,
                          int originalMaxPositions, double attentionFactor, double betaFast, double betaSlow,
                          boolean truncate, List<Double> shortFactor, List<Double> longFactor)
    implements java.io.Serializable {

  public static final RopeScaling NONE = new RopeScaling("default", 1, 1, 1, 0);

  /** The llama3 (and plain) form: no attention factor, no YaRN or LongRoPE parameters. */
  public RopeScaling(String type, double factor, double lowFreqFactor, double highFreqFactor, int originalMaxPositions) {
    this(type, factor, lowFreqFactor, highFreqFactor, originalMaxPositions, 1, 32, 1, true, List.of(), List.of());
  }

  public RopeScaling {
    shortFactor = List.copyOf(shortFactor);
    longFactor = List.copyOf(longFactor);
  }

  /** A scaling of {@code type} with only a factor (linear, dynamic). */
  public static RopeScaling of(String type, double factor) {
    return new RopeScaling(type, factor, 1, 1, 0);
  }

  public boolean isLlama3() {
    return type.equals("llama3");
  }

  /**
   * Whether the frequencies depend on how far a forward call reaches (dynamic NTK, LongRoPE): both
   * backends then take the table for each call's length from {@link Rope#atLength}.
   */
  public boolean dependsOnLength() {
    return type.equals("dynamic") || type.equals("longrope");
  }

  /**
   * Names the table {@link Rope#atLength} gives a call reaching {@code length} (same thresholds):
   * equal names, equal tables. Prefix reuse (io.longsieve.policy.PrefixReuse) shares a kept prefix
   * only between prompts whose prefill ran with equal tables.
   *
   * @param maxPositions the config's max_position_embeddings (dynamic NTK's reference length)
   */
  public String tableAt(int length, int maxPositions) {
    return switch (type) {
      case "dynamic" -> length > maxPositions ? "dynamic@" + length : "base";
      case "longrope" -> length > originalMaxPositions ? "long" : "short";
      default -> "base";
    };
  }

  /**
   * Whether a sequence decoding at position {@code pos} must be recomputed from scratch first: a
   * LongRoPE model's cache filled within the original window holds keys rotated with the short
   * factors, and transformers' Phi-3 generation (Phi3ForCausalLM.prepare_inputs_for_generation)
   * drops that cache and runs the whole sequence again with the long factors at the first step
   * whose sequence passes the window, position original_max_position_embeddings. A prompt already
   * past the window was prefilled with the long factors and never meets this position.
   */
  public boolean recomputesCacheAt(int pos) {
    return type.equals("longrope") && pos == originalMaxPositions;
  }

  /** One line for {@code inspect} and logs, e.g. "yarn factor 4 original 32768 attention 1.139". */
  public String describe() {
    switch (type) {
      case "default":
        return "none";
      case "linear":
      case "dynamic":
        return type + " factor " + num(factor);
      case "llama3":
        return "llama3 factor " + num(factor) + " low " + num(lowFreqFactor) + " high " + num(highFreqFactor) + " original "
            + originalMaxPositions;
      case "yarn":
        return "yarn factor " + num(factor) + " original " + originalMaxPositions + " attention " + num(attentionFactor)
            + " beta " + num(betaFast) + "/" + num(betaSlow);
      default:
        return type + " original " + originalMaxPositions + " attention " + num(attentionFactor);
    }
  }

  private static String num(double v) {
    if (v == Math.rint(v) && Math.abs(v) < 1e9) return Long.toString((long) v);
    return new java.math.BigDecimal(v).round(new java.math.MathContext(4)).stripTrailingZeros().toPlainString();
  }
}
