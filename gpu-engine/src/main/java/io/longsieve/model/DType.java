package io.longsieve.model;

/**
 * Element types a checkpoint may store; everything is widened to fp32 on load for the CPU.
 * F8_E4M3 is the float8_e4m3fn of FP8 checkpoints (weights only, always with a scale tensor
 * beside them: see {@link QuantizationConfig} and {@link Fp8Weight}).
 */
public enum DType {
  F32(4), F16(2), BF16(2), F8_E4M3(1);

  public final int bytes;

  DType(int bytes) {
    this.bytes = bytes;
  }

  /** The safetensors spelling ("F32", "F16", "BF16", "F8_E4M3"), or null when unsupported. */
  static DType ofSafetensors(String name) {
    switch (name) {
      case "F32": return F32;
      case "F16": return F16;
      case "BF16": return BF16;
      case "F8_E4M3": return F8_E4M3;
      default: return null;
    }
  }

  /** The 256 values of float8_e4m3fn as fp32, by byte; see {@link #e4m3ToFloat}. */
  private static final float[] E4M3 = new float[256];

  static {
    for (int b = 0; b < 256; b++) E4M3[b] = e4m3Bits(b);
  }

  /**
   * float8_e4m3fn (1 sign, 4 exponent bits of bias 7, 3 mantissa bits; no infinities; S.1111.111 is
   * NaN; largest finite 448; subnormals down to 2^-9) to fp32, bit for bit what PyTorch's
   * {@code tensor.to(torch.float32)} gives: NaN keeps its sign and comes out as 0x7ff00000 /
   * 0xfff00000 (the mantissa bits shifted up), -0 stays -0.
   */
  public static float e4m3ToFloat(byte b) {
    return E4M3[b & 0xff];
  }

  private static float e4m3Bits(int b) {
    int sign = (b & 0x80) << 24, exp = (b >>> 3) & 0xf, mant = b & 0x7;
    if (exp == 0xf && mant == 0x7) return Float.intBitsToFloat(sign | 0x7f800000 | (mant << 20));
    if (exp == 0) {
      float v = mant * 0x1p-9f;  // subnormal: mant / 8 * 2^(1 - 7), exact in fp32
      return sign == 0 ? v : -v;
    }
    return Float.intBitsToFloat(sign | ((exp + 120) << 23) | (mant << 20));
  }

  /**
   * fp32 to float8_e4m3fn, round to nearest even and saturated at +-448 (the quantizers clamp before
   * they cast; CUDA's __nv_cvt_float_to_fp8 with __NV_SATFINITE does the same): the CPU twin of the
   * GPU's activation quantization. NaN gives 0x7f.
   */
  public static byte floatToE4m3(float f) {
    if (Float.isNaN(f)) return 0x7f;
    int sign = f < 0 || (f == 0 && Float.floatToRawIntBits(f) < 0) ? 0x80 : 0;
    float a = Math.min(Math.abs(f), 448f);
    int code;
    if (a < 0x1p-6f) {
      code = (int) Math.rint(a * 0x1p9f);  // subnormals in steps of 2^-9, exact scaling; 8 is the smallest normal
    } else {
      int e = Math.getExponent(a);                          // 2^e <= a < 2^(e+1), -6 <= e <= 8
      int m = (int) Math.rint(Math.scalb(a, -e) * 8 - 8);  // 3 mantissa bits, ties to even (rint)
      code = ((e + 7) << 3) + m;                            // m == 8 carries into the exponent, as it should
    }
    return (byte) (sign | code);
  }

  /**
   * Round-to-nearest-even to IEEE half, subnormals, overflow to infinity and NaN included, as
   * PyTorch casts fp32 to float16 (Java 17 has no built-in; Float.floatToFloat16 came in 20).
   */
  public static short floatToF16(float f) {
    int bits = Float.floatToRawIntBits(f);
    int sign = (bits >>> 16) & 0x8000;
    int exp = (bits >>> 23) & 0xff;
    int mant = bits & 0x7fffff;
    if (exp == 0xff) return (short) (sign | 0x7c00 | (mant != 0 ? 0x200 | (mant >>> 13) : 0));
    int e = exp - 127 + 15;
    if (e >= 0x1f) return (short) (sign | 0x7c00);
    if (e <= 0) {
      if (e < -10) return (short) sign;  // below half of the smallest subnormal: rounds to zero
      int m = mant | 0x800000;           // the implicit bit, then shift into the subnormal range
      int shift = 14 - e;
      int half = m >>> shift;
      int rest = m & ((1 << shift) - 1), mid = 1 << (shift - 1);
      if (rest > mid || (rest == mid && (half & 1) != 0)) half++;
      return (short) (sign | half);
    }
    int half = (e << 10) | (mant >>> 13);
    int rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (half & 1) != 0)) half++;  // a carry into the exponent is right
    return (short) (sign | half);
  }

  public static float bf16ToFloat(short bits) {
    return Float.intBitsToFloat((bits & 0xffff) << 16);
  }

  /** Round-to-nearest-even, as PyTorch does when it casts to bf16. */
  public static short floatToBf16(float f) {
    int bits = Float.floatToRawIntBits(f);
    if (Float.isNaN(f)) return (short) 0x7fc0;
    int rounding = 0x7fff + ((bits >>> 16) & 1);
    return (short) ((bits + rounding) >>> 16);
  }

  /** IEEE half to float, subnormals, infinities and NaN included (Java 17 has no built-in). */
  public static float f16ToFloat(short half) {
    int h = half & 0xffff;
    int sign = (h & 0x8000) << 16;
    int exp = (h >>> 10) & 0x1f;
    int mant = h & 0x3ff;
    if (exp == 0x1f) return Float.intBitsToFloat(sign | 0x7f800000 | (mant << 13));
    if (exp == 0) {
      float v = mant * 0x1p-24f;
      return sign == 0 ? v : -v;
    }
    return Float.intBitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
  }
}
