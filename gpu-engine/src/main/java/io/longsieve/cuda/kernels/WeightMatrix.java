package io.longsieve.cuda.kernels;

import io.longsieve.cuda.driver.DeviceBuffer;

/**
 * A linear layer's weight on the device: bf16 (n, k), or FP8 with its scales ({@link Fp8Matrix});
 * exactly one of the two is set.
 */
public record WeightMatrix(DeviceBuffer bf16, Fp8Matrix fp8) {

  public WeightMatrix {
    if ((bf16 == null) == (fp8 == null)) throw new IllegalArgumentException("a weight is bf16 or FP8, not both or neither");
  }

  public static WeightMatrix of(DeviceBuffer bf16) {
    return new WeightMatrix(bf16, null);
  }

  public static WeightMatrix of(Fp8Matrix fp8) {
    return new WeightMatrix(null, fp8);
  }
}
