package io.longsieve.model;

/** Element types a checkpoint may store; everything is widened to fp32 on load for the CPU. */
public enum DType {
  F32(4), F16(2), BF16(2);

  public final int bytes;

  DType(int bytes) {
    this.bytes = bytes;
  }

  /** The safetensors spelling ("F32", "F16", "BF16"), or null when unsupported. */
  static DType ofSafetensors(String name) {
    switch (name) {
      case "F32": return F32;
      case "F16": return F16;
      case "BF16": return BF16;
      default: return null;
    }
  }

  static float bf16ToFloat(short bits) {
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
  static float f16ToFloat(short half) {
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
