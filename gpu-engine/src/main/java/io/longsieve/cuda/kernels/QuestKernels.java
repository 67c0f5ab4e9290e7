package io.longsieve.cuda.kernels;

import io.longsieve.cuda.driver.Launcher;
import jcuda.driver.CUdeviceptr;

/**
 * Launches of the decode baselines' kernels (quest.cu): Quest's page bounds, page scores, top
 * pages and attention over them, and StreamingLLM's window list. Shapes are in the parameter
 * names; everything is queued on the engine's stream. Failure semantics: IllegalArgumentException
 * for shapes the kernels do not take (head dim not even or above 256,
 * more than 16 query heads per KV head); CUDA errors surface from
 * the launch or a later synchronisation.
 */
public final class QuestKernels {

  static final int SCORE_PAGES = 64;   // QS_PAGES: pages scored per block
  public static final int MAX_CHUNK = 2048;   // list entries per attention block (shared memory: chunk floats + offsets)
  public static final int MAX_GROUP = 16;     // QS_MAXG: query heads per KV head the score kernel takes

  private final Kernels k;
  private final Launcher l;
  private final int smCount;

  public QuestKernels(Kernels k) {
    this.k = k;
    this.l = k.launcher();
    this.smCount = k.smCount();
  }

  public static void checkHeadDim(int d) {
    // a multiple of 4: the split merge (attn_combine) takes each head row four dimensions at a time
    if (d < 4 || d % 4 != 0 || d > 256) {
      throw new IllegalArgumentException("head dim " + d + " must be a multiple of 4 and <= 256");
    }
  }

  /** mn, mx (pages, nKv * d) bf16 = element-wise min/max of kv.kRope over the slots of Quest pages [p0, p1). */
  public void bounds(CUdeviceptr mn, CUdeviceptr mx, Kernels.KvView kv, int qpage, int p0, int p1) {
    if (p1 <= p0) return;
    l.launch("quest_bounds", p1 - p0, 1, 1, 256, 0, mn, mx, kv.kRope(), kv.pageTable(), kv.nKv(), kv.headDim(),
        kv.pageSize(), qpage, p0);
  }

  /** score (nHeads, full) f32 = Σ_i max(q_i·mn_i, q_i·mx_i), q = head h of qPre (1, nHeads * d) f32 rotated at pos. */
  public void scores(CUdeviceptr score, CUdeviceptr qPre, CUdeviceptr invFreq, int pos, CUdeviceptr mn, CUdeviceptr mx,
              int nHeads, int nKv, int d, int full) {
    scores(score, qPre, invFreq, pos, mn, mx, nHeads, nKv, d, full, null);
  }

  /** As above; a non-null step (a captured decode step's sizes, SelectKernels.STEP_*) takes pos from its STEP_POS. */
  public void scores(CUdeviceptr score, CUdeviceptr qPre, CUdeviceptr invFreq, int pos, CUdeviceptr mn, CUdeviceptr mx,
              int nHeads, int nKv, int d, int full, CUdeviceptr step) {
    checkHeadDim(d);
    if (nHeads % nKv != 0 || nHeads / nKv > MAX_GROUP) {
      throw new IllegalArgumentException(nHeads + " query heads over " + nKv + " KV heads: at most " + MAX_GROUP + " per KV head");
    }
    l.launch("quest_scores", nKv, (full + SCORE_PAGES - 1) / SCORE_PAGES, 1, 256, 0, score, qPre, invFreq, pos, mn,
        mx, nHeads, nKv, d, full, step);
  }

  /** chosen (nHeads, pick) int = per head the pick highest of score (nHeads, full), ties to the lower page, ascending. */
  public void topk(CUdeviceptr chosen, CUdeviceptr score, int nHeads, int full, int pick) {
    if (pick <= 0 || pick >= full) throw new IllegalArgumentException("pick " + pick + " must be in (0, " + full + ")");
    l.launch("quest_topk", nHeads, 1, 1, 256, 0, chosen, score, full, pick);
  }

  /** quest_attend's shared memory: rotated query, scores and reduction (f32), then the entries' offsets (size_t). */
  public static int attendSmem(int d, int chunk) {
    return (d + chunk + 32) * 4 + chunk * 8;
  }

  /** List entries per attention block and the number of blocks per head. */
  public record Plan(int chunk, int splits) {
    public long partialFloats(int nHeads, int d) {
      return (long) nHeads * splits * (d + 2);
    }
  }

  /** About four blocks per multiprocessor over all heads, 64 .. MAX_CHUNK entries each. */
  public static Plan plan(int len, int nHeads, int sms) {
    int target = Math.max(1, (4 * sms + nHeads - 1) / nHeads);
    int chunk = Math.min(MAX_CHUNK, Math.max(64, ((len + target - 1) / target + 31) / 32 * 32));
    return new Plan(chunk, (len + chunk - 1) / chunk);
  }

  public Plan plan(int len, int nHeads) {
    return plan(len, nHeads, smCount);
  }

  /**
   * out (1, nHeads, d) bf16 = each query head's attention over its pick chosen pages (chosen
   * (nHeads, pick) int, Quest pages of qpage slots) then the tail slots full * qpage ..
   * full * qpage + tail - 1, keys kv.kRope, query head h of qPre rotated at pos, plus kv.bias.
   *
   * @param part at least plan.partialFloats(nHeads, d) f32 of scratch
   */
  public void attend(CUdeviceptr out, CUdeviceptr part, Plan plan, CUdeviceptr qPre, CUdeviceptr invFreq, int pos,
              Kernels.KvView kv, CUdeviceptr chosen, int nHeads, int qpage, int pick, int full, int tail, float scale) {
    attend(out, part, plan, qPre, invFreq, pos, kv, chosen, nHeads, qpage, pick, full, tail, scale, null);
  }

  /**
   * As above; a non-null step takes pos from its STEP_POS and the tail from its STEP_END (slots seen)
   * less full * qpage; plan must hold the step's list (the host's tail gives the same plan).
   */
  public void attend(CUdeviceptr out, CUdeviceptr part, Plan plan, CUdeviceptr qPre, CUdeviceptr invFreq, int pos,
              Kernels.KvView kv, CUdeviceptr chosen, int nHeads, int qpage, int pick, int full, int tail, float scale,
              CUdeviceptr step) {
    int d = kv.headDim();
    checkHeadDim(d);
    long partO = (long) nHeads * plan.splits() * d;
    CUdeviceptr ml = part.withByteOffset(partO * 4);
    int smem = attendSmem(d, plan.chunk());
    l.launch("quest_attend", nHeads, plan.splits(), 1, 128, smem, part, ml, qPre, invFreq, pos, kv.kRope(), kv.v(),
        kv.pageTable(), kv.bias(), chosen, nHeads, kv.nKv(), d, kv.pageSize(), qpage, pick, full, tail, plan.chunk(),
        scale, step);
    k.combine(out, part, ml, 1, nHeads, plan.splits(), d);
  }

  /** list (sinks + recent) int = 0 .. sinks - 1, then n - recent .. n - 1 (StreamingLLM's window). */
  public void windowList(CUdeviceptr list, int sinks, int recent, int n) {
    windowList(list, sinks, recent, n, null);
  }

  /** As above; a non-null step (a captured decode step's sizes, SelectKernels.STEP_*) takes n from its STEP_END. */
  public void windowList(CUdeviceptr list, int sinks, int recent, int n, CUdeviceptr step) {
    l.launch("window_list", 1, 1, 1, 256, 0, list, sinks, recent, n, step);
  }
}
