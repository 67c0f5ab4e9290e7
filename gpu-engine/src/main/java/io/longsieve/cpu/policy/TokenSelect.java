package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.CpuOps;
import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.cpu.kernels.KvList;
import io.longsieve.cpu.kernels.RopeTable;
import io.longsieve.cpu.kernels.TiledAttention;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicyTerm;
import io.longsieve.policy.SelectionProbe;
import io.longsieve.policy.SelectionStats;
import io.longsieve.policy.TokenSelectParams;
import java.util.Arrays;

/**
 * TokenSelect: dynamic token-level KV selection for decode and chunked prefill (arXiv 2411.02886;
 * behaviour of the official code, research/algorithms.md §1). Per layer and per call (one decode
 * token, or one prefill sub-chunk of {@code chunk} tokens):
 * <ol>
 *   <li>while sinks + k + window ≥ cached tokens N: dense attention, no selection;</li>
 *   <li>fingerprint: the call's queries rotated to positions window, window+1, … and averaged;</li>
 *   <li>every candidate slot in [sinks, N − local) is scored per query head against its pre-RoPE
 *       key, s = q·k (no 1/√d unless {@code scale=sqrt}), KV head h / group ({@code gqa=div}) or
 *       the official h % nKv ({@code gqa=mod});</li>
 *   <li>softmax per head over the candidates, summed over heads in fp32 (soft vote): one vote per
 *       layer ({@code heads=layer}, official) or one per KV head g over the heads that attend
 *       with it, h / group = g, also under {@code gqa=mod} ({@code heads=kvhead}); optional
 *       max-pool ({@code pool}, the official padding, so an even kernel shifts by one);</li>
 *   <li>top-k (ties to the lower slot), ascending; attend to sinks ++ top-k ++ local where local is
 *       the last max(window, call length) slots; RoPE by list index ({@code positions=compact},
 *       official) or by original position;</li>
 *   <li>Selection Cache ({@code cache=on}; off by default, as the official release runs it): per
 *       layer, when the cosine of this fingerprint with the
 *       last scored one is ≥ threshold and the top-k budget is unchanged, reuse the last top-k
 *       (sinks and window recomputed; {@link SelectionCache}).</li>
 * </ol>
 * With {@code score=rope} (not the paper's algorithm; the GPU twin cuda/policy/GpuTokenSelect computes the
 * same) step 3 scores every candidate with its key rotated at its original position
 * ({@code kv.ropedKeys}) against the mean of the call's queries rotated at their real positions in
 * fp32: the true attention logits of the call (times 1/√d with {@code scale=sqrt}); the fingerprint
 * of step 2 still decides Selection Cache hits. Not with {@code index=int4} (IllegalArgumentException).
 * With {@code index=int4} step 3 scores against the policy's own int4 copy of the pre-RoPE keys
 * (per slot and KV head: scale = max|k| / 7, values round(k / scale) in [-7, 7]), kept up to date
 * incrementally per call and rebuilt after {@link #reset} ({@link Int4KeyIndex}); the GPU part keeps
 * the same copy and reads a quarter of the key bytes.
 * Buffers grow to the largest context seen and are reused; nothing is allocated per token.
 */
final class TokenSelect implements ComposedPolicy.Prefill, ComposedPolicy.Decode {

  private final SelectionStats stats;
  private final ModelConfig c;
  private final TokenSelectParams params;
  private final float voteScale;
  private final int heads, kvHeads, d, group, lists;
  private final RopeTable table;

  private final float[] qf;             // (heads * headDim) fingerprint of this call
  private final float[] qPos;           // (heads * headDim) score=rope: mean of the call's queries rotated at their positions
  private final SelectionCache cache;   // cache=on: per layer the last fresh top-k and its fingerprint
  private final Int4KeyIndex index;     // index=int4: per layer the quantised copy of the pre-RoPE keys
  private float[] probs = new float[0];   // (heads, candidates) per-head softmax of the vote logits
  private float[] votes = new float[0];   // (lists, candidates) summed votes
  private float[] pooled = new float[0];  // (candidates) max-pooled votes of one list
  private long[] work = new long[0];      // (candidates) top-k scratch
  private int[] top = new int[0];         // (lists, k) selected slots of this call
  private int[] list = new int[0];        // (lists, listLen) slots attended: sinks ++ top ++ local
  private float[] keyBuf = new float[0];  // (kvHeads, listLen, headDim) keys rotated at list index
  private int listLen;                    // entries per list of the last sparse call (tests)
  private int votedCands;                 // candidates of the last scored call (tests)
  private boolean scored;                 // the last sparse call scored (no Selection Cache hit)

  TokenSelect(PolicyTerm t, SelectionStats stats, AttentionContext ctx) {
    this.stats = stats;
    this.c = ctx.config();
    params = TokenSelectParams.of(t);
    voteScale = params.voteScale(ctx.scale());
    heads = c.numHeads();
    kvHeads = c.numKvHeads();
    d = c.headDim();
    group = c.group();
    lists = params.perKvHead() ? kvHeads : 1;
    qPos = new float[params.ropeScore() ? heads * d : 0];
    table = new RopeTable(ctx.rope());
    qf = new float[heads * d];
    cache = new SelectionCache(c.numLayers(), heads * d);
    index = new Int4KeyIndex(c.numLayers(), kvHeads, d);
  }

  @Override
  public void prefill(int layer, float[] q, int n, int pos0, KvCache kv, float[] out, AttentionContext ctx) {
    table.use(ctx.rope());
    int before = kv.length(layer) - n;
    if (params.int4()) index.update(layer, kv);
    for (int s = 0; s < n; s += params.chunk()) {
      int m = Math.min(params.chunk(), n - s);
      block(layer, q, s, m, pos0 + s, before + s + m, kv, out, ctx, false);
    }
  }

  /**
   * The Selection Cache as the prefix's last call left it (the first call after the prefix reads it);
   * none with the cache off. The int4 copy needs nothing: a fork's quantises every slot on its first
   * call, each slot alone, to the same values.
   */
  @Override
  public ComposedPolicy.KeptState keepState(int tokens) {
    return params.cacheOn() ? new KeptCache(cache.copy(), (long) c.numLayers() * heads * d * 4) : null;
  }

  @Override
  public void adoptState(ComposedPolicy.KeptState state, KvCache kv) {
    cache.copyFrom(((KeptCache) state).cache);
  }

  private record KeptCache(SelectionCache cache, long bytes) implements ComposedPolicy.KeptState {}

  @Override
  public void decode(int layer, float[] q, int pos, KvCache kv, float[] out, AttentionContext ctx) {
    table.use(ctx.rope());
    if (params.int4()) index.update(layer, kv);
    block(layer, q, 0, 1, pos, kv.length(layer), kv, out, ctx, true);
  }

  @Override
  public void reset() {
    cache.clear();
    index.clear(); // slots moved: quantise all again on the next call
  }

  /** The lists (lists, listLen) of the last sparse call and its length (tests compare them with the GPU's). */
  int[] lastLists() {
    return Arrays.copyOf(list, lists * listLen);
  }

  /** Votes (lists, candidates) of the last scored call, before pooling (tests judge ties with them). */
  float[] lastVotes() {
    return Arrays.copyOf(votes, lists * votedCands);
  }

  int lastListLen() {
    return listLen;
  }

  /** Scoring KV head of query head h: the official modulo mapping or the standard h / group. */
  int scoringKvHead(int h) {
    return params.gqaMod() ? h % kvHeads : h / group;
  }

  /** Rows row0 .. row0+m-1 of q (positions pos0 ..) whose last row sees slots [0, end). */
  private void block(int layer, float[] q, int row0, int m, int pos0, int end, KvCache kv, float[] out,
                     AttentionContext ctx, boolean decode) {
    TokenSelectParams.Block b = params.block(end, m);
    int local = b.local();
    if (b.dense()) {
      DenseAttention.attendRows(layer, q, row0, m, pos0, end - m, kv, out, ctx);
      record(layer, m, pos0 + m, end, end, decode);
      return;
    }
    long t0 = System.nanoTime();
    int cands = b.cands();
    int count = select(layer, q, row0, m, pos0, cands, b.count(), kv, ctx);
    int listLen = params.sinks() + count + local;
    this.listLen = listLen;
    buildLists(count, listLen, end, local);
    stats.selectionNanos += System.nanoTime() - t0;
    if (scored && SelectionProbe.active()) probe(layer, q, row0, m, pos0, end, decode, kv);
    attendLists(layer, q, row0, m, pos0, listLen, kv, out, ctx);
    record(layer, m, pos0 + m, end, listLen, decode);
  }

  /** The selection and its inputs for {@link SelectionProbe} (a scored block; a cache hit scored nothing). */
  private void probe(int layer, float[] q, int row0, int m, int pos0, int end, boolean decode, KvCache kv) {
    float[] keys = kv.keys[layer];
    int kvDim = kv.kvDim;
    SelectionProbe.report(new SelectionProbe.TokenSelect(layer, pos0, m, end, decode, lists,
        Arrays.copyOfRange(q, row0 * heads * d, (row0 + m) * heads * d), () -> Arrays.copyOf(keys, end * kvDim),
        lastVotes(), lastLists()));
  }

  /** Counts the block's work; the context is the sequence so far (context ≥ end once the cache was compressed). */
  private void record(int layer, int m, int context, int end, int listLen, boolean decode) {
    if (decode) {
      stats.decode(layer, (double) listLen * heads, context, heads);
    } else {
      stats.prefill(layer, SelectionStats.densePairs(m, listLen - m, heads), SelectionStats.densePairs(m, end - m, heads));
    }
  }

  /** Fills top (lists, count) with selected candidate slots; returns count per list. */
  private int select(int layer, float[] q, int row0, int m, int pos0, int cands, int kk, KvCache kv,
                     AttentionContext ctx) {
    fingerprint(q, row0, m);
    int count = Math.min(kk, cands);
    scored = false;
    if (params.cacheOn()) {
      stats.cacheLookups++;
      // a hit needs the same budget: with k_frac the budget grows with the context and forces a fresh
      // selection (the GPU decides hits on the device and must know the list length without asking)
      if (cache.hit(layer, qf, count, params.threshold())) {
        stats.cacheHits++;
        ensureTop(count);
        cache.copyTop(layer, top, lists * count);
        return count;
      }
    }
    if (params.ropeScore()) realPositionQuery(q, row0, m, pos0, ctx);
    score(layer, cands, kv, ctx);
    votedCands = cands;
    scored = true;
    ensureTop(count);
    if (work.length < cands) work = new long[cands];
    for (int g = 0; g < lists; g++) {
      float[] v = votes;
      int off = g * cands, n = cands;
      if (params.pool() > 1) {
        n = maxPool(votes, off, cands, params.pool());
        v = pooled;
        off = 0;
      }
      int got = TopK.select(v, off, n, Math.min(count, n), work, top, g * count, params.sinks());
      for (int i = got; i < count; i++) top[g * count + i] = top[g * count + got - 1]; // never for pool ≤ 2
    }
    if (params.cacheOn()) cache.store(layer, qf, top, lists, count);
    return count;
  }

  /** qf = mean over the m rows of each query head rotated to position window + i (QUERY_ROTATE). */
  void fingerprint(float[] q, int row0, int m) {
    table.ensure(params.window() + m);
    Arrays.fill(qf, 0f);
    float[] row = DenseAttention.scratch(d); // caller thread only
    for (int i = 0; i < m; i++) {
      for (int h = 0; h < heads; h++) {
        System.arraycopy(q, ((row0 + i) * heads + h) * d, row, 0, d);
        table.rotate(row, 0, params.window() + i);
        for (int j = 0; j < d; j++) qf[h * d + j] += row[j];
      }
    }
    float inv = 1f / m;
    for (int j = 0; j < qf.length; j++) qf[j] *= inv;
  }

  /** qPos = mean over the m rows of each query head rotated at its own position pos0 + i (score=rope). */
  private void realPositionQuery(float[] q, int row0, int m, int pos0, AttentionContext ctx) {
    Arrays.fill(qPos, 0f);
    RotationScratch rs = RotationScratch.of(d); // caller thread only
    float[] row = rs.qr;
    for (int i = 0; i < m; i++) {
      ctx.rope().angles(pos0 + i, rs.cos, rs.sin);
      for (int h = 0; h < heads; h++) {
        System.arraycopy(q, ((row0 + i) * heads + h) * d, row, 0, d);
        ctx.rope().apply(row, 0, 1, rs.cos, rs.sin);
        for (int j = 0; j < d; j++) qPos[h * d + j] += row[j];
      }
    }
    float inv = 1f / m;
    for (int j = 0; j < qPos.length; j++) qPos[j] *= inv;
  }

  /**
   * probs[h, c] = softmax_c(voteScale · qf_h · K[sinks + c]) (score=rope: qPos_h and the rotated keys);
   * votes[g, c] = Σ_h probs[h, c] over list g's heads.
   */
  private void score(int layer, int cands, KvCache kv, AttentionContext ctx) {
    if (probs.length < heads * cands) probs = new float[heads * cands];
    if (votes.length < lists * cands) votes = new float[lists * cands];
    boolean rope = params.ropeScore();
    float[] keys = rope ? kv.ropedKeys[layer] : kv.keys[layer], qv = rope ? qPos : qf;
    int kvDim = kv.kvDim;
    ctx.pool().forRange(heads, (from, to) -> {
      for (int h = from; h < to; h++) {
        int g = scoringKvHead(h), ko = g * d, po = h * cands;
        for (int cIdx = 0; cIdx < cands; cIdx++) {
          int slot = params.sinks() + cIdx;
          probs[po + cIdx] = params.int4()
              ? voteScale * index.dot(layer, qf, h * d, slot, g)
              : voteScale * CpuOps.dot(qv, h * d, keys, slot * kvDim + ko, d);
        }
        CpuOps.softmax(probs, po, cands);
      }
    });
    ctx.pool().forRange(cands, (from, to) -> {
      for (int g = 0; g < lists; g++) Arrays.fill(votes, g * cands + from, g * cands + to, 0f);
      for (int h = 0; h < heads; h++) { // head order fixed: sums are deterministic
        // list g is attended by the heads that read KV head g (h / group, as repeat_kv): they vote
        // for it, whichever KV head gqa=mod scored them against
        int g = params.perKvHead() ? h / group : 0;
        int vo = g * cands, po = h * cands;
        for (int cIdx = from; cIdx < to; cIdx++) votes[vo + cIdx] += probs[po + cIdx];
      }
    });
  }

  /**
   * pooled = max_pool1d(v[off .. off+n), kernel, stride 1, padding (kernel-1)/2) as torch computes it
   * (padding is -inf); returns its length, n + 2·pad − kernel + 1 (one short for an even kernel).
   */
  int maxPool(float[] v, int off, int n, int kernel) {
    int pad = (kernel - 1) / 2, len = n + 2 * pad - kernel + 1;
    if (pooled.length < len) pooled = new float[Math.max(len, 1)];
    for (int o = 0; o < len; o++) {
      float mx = Float.NEGATIVE_INFINITY;
      for (int j = o - pad; j < o - pad + kernel; j++) if (j >= 0 && j < n) mx = Math.max(mx, v[off + j]);
      pooled[o] = mx;
    }
    return len;
  }

  private void ensureTop(int count) {
    if (top.length < lists * count) top = new int[lists * count];
  }

  private void buildLists(int count, int listLen, int end, int local) {
    if (list.length < lists * listLen) list = new int[lists * listLen];
    for (int g = 0; g < lists; g++) {
      int o = g * listLen;
      for (int i = 0; i < params.sinks(); i++) list[o + i] = i;
      System.arraycopy(top, g * count, list, o + params.sinks(), count);
      for (int i = 0; i < local; i++) list[o + params.sinks() + count + i] = end - local + i;
    }
  }

  /**
   * Row i sees the first listLen − m + i + 1 entries of its list (its own slot is the last of them);
   * the query heads of KV head g share its list (TiledAttention, one group per KV head).
   */
  private void attendLists(int layer, float[] q, int row0, int m, int pos0, int listLen, KvCache kv, float[] out,
                           AttentionContext ctx) {
    boolean compact = params.compact();
    if (compact) {
      table.ensure(listLen);
      if (keyBuf.length < kvHeads * listLen * d) keyBuf = new float[kvHeads * listLen * d];
      ctx.pool().forRange(kvHeads, (from, to) -> {
        for (int g = from; g < to; g++) {
          int at = (params.perKvHead() ? g : 0) * listLen;
          ListAttention.gatherCompact(layer, g, list, at, listLen, kv, table, keyBuf, g * listLen * d);
        }
      });
    } else {
      ctx.ropeTable().ensure(pos0 + m);
    }
    int[] slots = list;
    float[] keys = keyBuf;
    RopeTable real = ctx.ropeTable();
    TiledAttention.run(ctx.pool(), ctx.tiles(), kvHeads, group, d, ctx.scale(), new TiledAttention.Problem() {
      @Override
      public int positions(int g) {
        return m;
      }

      @Override
      public KvList keys(int g) {
        int at = (params.perKvHead() ? g : 0) * listLen;
        return compact ? KvList.gathered(kv, layer, g, slots, at, keys, g * listLen * d) : KvList.slots(kv, layer, g, slots, at);
      }

      @Override
      public void query(int g, int i, int hh, float[] dst, int off) {
        System.arraycopy(q, ((row0 + i) * heads + g * group + hh) * d, dst, off, d);
        if (compact) table.rotate(dst, off, listLen - m + i); // its own entry's list index
        else real.rotate(dst, off, pos0 + i);
      }

      @Override
      public int from(int g, int i) {
        return 0;
      }

      @Override
      public int to(int g, int i) {
        return listLen - m + i + 1;
      }

      @Override
      public int outOffset(int g, int i, int hh) {
        return ((row0 + i) * heads + g * group + hh) * d;
      }
    }, out, kv.attended, layer);
  }
}
