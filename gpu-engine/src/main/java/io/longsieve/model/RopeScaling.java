package io.longsieve.model;

/**
 * Llama-3 style RoPE frequency scaling ({@code rope_type: llama3}); {@link #NONE} for plain RoPE.
 * Frequencies with a wavelength above {@code originalMaxPositions / lowFreqFactor} are divided by
 * {@code factor}, those below {@code originalMaxPositions / highFreqFactor} are kept, and the band
 * between is interpolated, exactly as transformers computes it.
 */
public record RopeScaling(String type, double factor, double lowFreqFactor, double highFreqFactor,
                          int originalMaxPositions) implements java.io.Serializable {

  public static final RopeScaling NONE = new RopeScaling("default", 1, 1, 1, 0);

  public boolean isLlama3() {
    return type.equals("llama3");
  }
}
