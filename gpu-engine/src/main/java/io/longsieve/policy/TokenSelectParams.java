package io.longsieve.policy;

/**
 * TokenSelect's parameters as read from its policy term, and the sizes of one selection block that
 * follow from them: one source for the CPU policy ({@link TokenSelect}) and the GPU part
 * (cuda/policy/GpuTokenSelect), so both take the same dense/sparse decision and attend lists of the same
 * length. Meanings and defaults: {@link PolicyCatalog}.
 */
public record TokenSelectParams(int sinks, int k, double kFrac, int window, int chunk, boolean perKvHead,
                                boolean gqaMod, int pool, boolean compact, boolean sqrtScale, boolean cacheOn,
                                double threshold, boolean int4, boolean ropeScore) {

  /** score=rope scores the rotated keys, index=int4 is a copy of the pre-RoPE keys: not both. */
  public TokenSelectParams {
    if (ropeScore && int4) {
      throw new IllegalArgumentException("tokenselect: score=rope reads the rotated keys, index=int4 holds pre-RoPE keys;"
          + " use one of them");
    }
  }

  public static TokenSelectParams of(PolicyTerm t) {
    return new TokenSelectParams(t.intParam("sinks"), t.intParam("k"), t.doubleParam("k_frac"), t.intParam("window"),
        Math.max(1, t.intParam("chunk")), t.text("heads").equals("kvhead"), t.text("gqa").equals("mod"),
        t.intParam("pool"), t.text("positions").equals("compact"), t.text("scale").equals("sqrt"),
        t.text("cache").equals("on"), t.doubleParam("threshold"), t.text("index").equals("int4"),
        t.text("score").equals("rope"));
  }

  /** The factor on the vote logits: 1/√d with {@code scale=sqrt}, else 1 (official). */
  public float voteScale(float attentionScale) {
    return sqrtScale ? attentionScale : 1f;
  }

  /**
   * Sizes of a block of m rows whose last row sees slots [0, end): dense when sinks + top-k +
   * local covers the context (listLen = end); else candidates [sinks, end - local), count of them
   * selected and the list sinks ++ top ++ local.
   */
  public Block block(int end, int m) {
    int local = Math.max(window, m);
    int kk = kFrac > 0 ? (int) Math.max(1, Math.round(kFrac * end)) : k;
    if ((long) sinks + kk + local >= end) return new Block(true, local, 0, 0, end);
    int cands = end - local - sinks, count = Math.min(kk, cands);
    return new Block(false, local, cands, count, sinks + count + local);
  }

  /** One block's sizes; see {@link #block}. */
  public record Block(boolean dense, int local, int cands, int count, int listLen) {
    /** Slots [0, scoredEnd) hold every key the scoring reads (sinks + cands; 0 when dense). */
    public int scoredEnd() {
      return dense ? 0 : listLen - count - local + cands;
    }
  }
}
