package io.longsieve.bench;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kernels.ListKernels;
import io.longsieve.cuda.kernels.SelectKernels;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import java.util.Arrays;
import java.util.Locale;
import java.util.function.Consumer;
import jcuda.driver.CUdeviceptr;

/**
 * TokenSelect decode attention per layer against dense decode attention (issue 5 §3), on one layer
 * of the model's shapes with a random paged cache: dense flash decoding; TokenSelect split into
 * scoring (ts_decode_front: fingerprint, cache check and the query rotated at its list index in one
 * launch; logits with softmax statistics, soft vote; full keys and the int4 copy; and the score and
 * vote kernels alone, their bandwidth counting the logits; ts_votes also builds the top-k's first
 * histogram), top-k (radix select and the list; it needs the histogram of the votes just before it, so
 * it is timed as votes + top-k minus the votes alone, and once more building its histogram itself as
 * with max-pooled votes) and attention over the list (ListKernels, one launch); and the totals of a step
 * with full-key scoring and no cache hit, int4 scoring and no hit, and a cache hit (scoring kernels
 * return at once). The int4 copy's quantisation is not in a step: GpuTokenSelect quantises a slot
 * only once it leaves the local window, one launch per {@code window} steps. Ratios vs dense are
 * rows of their own (ratio in the fraction column). Defaults
 * sinks 128, k 2048, window 512, heads=layer, positions=compact.
 *
 * <p>Failure semantics: a context beyond the device memory throws from the allocation; should
 * ListKernels refuse (UnsupportedOperationException), list-attention rows are NaN and logged.
 */
public final class TokenSelectBench {
  private TokenSelectBench() {}

  static final int SINKS = 128, K = 2048, WINDOW = 512;

  public static void run(Bench b, ModelConfig c, int[] contexts) {
    int maxL = Arrays.stream(contexts).max().orElse(0);
    ModelConfig one = Bench.withLayers(c, 1);
    int heads = c.numHeads(), nKv = c.numKvHeads(), d = c.headDim(), qDim = c.qDim(), listLen = SINKS + K + WINDOW;
    float scale = (float) (1.0 / Math.sqrt(d));
    CudaContext ctx = b.ctx();
    Kernels k = b.kernels();
    SelectKernels sk = new SelectKernels(k);
    try (PagedKvCache kv = new PagedKvCache(ctx, one, maxL); Kernels.Workspace ws = new Kernels.Workspace(ctx);
         ListKernels lk = new ListKernels(k, ctx);
         DeviceBuffer qPre = ctx.alloc((long) qDim * 4, "bench qPre");
         DeviceBuffer q = ctx.alloc((long) qDim * 2, "bench q");
         DeviceBuffer qRot = ctx.alloc((long) qDim * 2, "bench q at list index");
         DeviceBuffer out = ctx.alloc((long) qDim * 2, "bench out");
         DeviceBuffer qf = ctx.alloc((long) qDim * 4, "bench fingerprint");
         DeviceBuffer cachedQf = ctx.alloc((long) qDim * 4, "bench cached fingerprint");
         DeviceBuffer hit = ctx.alloc(4, "bench hit");
         DeviceBuffer hits = ctx.alloc(8, "bench hits");
         DeviceBuffer topWs = ctx.alloc(SelectKernels.topKWorkspaceBytes(1), "bench top-k workspace");
         DeviceBuffer histScratch = ctx.alloc(SelectKernels.topKWorkspaceBytes(1), "bench vote histogram, never read");
         DeviceBuffer cand = ctx.alloc(SelectKernels.topKCandidateBytes(1, maxL), "bench top-k candidates");
         DeviceBuffer logits = ctx.alloc((long) heads * maxL * 4, "bench logits");
         DeviceBuffer partMl = ctx.alloc((long) heads * 4096 * 2 * 4, "bench partials");
         DeviceBuffer votes = ctx.alloc((long) maxL * 4, "bench votes");
         DeviceBuffer top = ctx.alloc((long) K * 4, "bench top");
         DeviceBuffer lists = ctx.alloc((long) listLen * 4, "bench lists");
         DeviceBuffer kq = ctx.alloc((long) kv.capacity * nKv * (d / 2), "bench int4 keys");
         DeviceBuffer ks = ctx.alloc((long) kv.capacity * nKv * 4, "bench int4 scales");
         DeviceBuffer cos = ctx.alloc((long) listLen * (d / 2) * 4, "bench rope cos");
         DeviceBuffer sin = ctx.alloc((long) listLen * (d / 2) * 4, "bench rope sin");
         DeviceBuffer invFreq = ctx.alloc((long) (d / 2) * 4, "bench inv freq");
         DeviceBuffer fpCos = ctx.alloc((long) (d / 2) * 4, "bench fingerprint cos");
         DeviceBuffer fpSin = ctx.alloc((long) (d / 2) * 4, "bench fingerprint sin")) {
      Kernels.KvView v = kv.layer(0);
      long cacheElems = (long) kv.pages * nKv * kv.pageSize * d;
      ColdLists.fillRandomKv(k, v, cacheElems, 11);
      k.fillRandomBf16(q.ptr(), qDim, 14, 0.1f);
      k.bf16ToF32(qPre.ptr(), q.ptr(), qDim);
      invFreq.upload(new Rope(one).inverseFrequencies());
      sk.ropeTable(fpCos.ptr(), fpSin.ptr(), invFreq.ptr(), WINDOW, 1, d / 2);
      hits.fill32(0);
      topWs.fill32(0);  // the top-k kernel leaves it zero after every call
      sk.quantise(kq.ptr(), ks.ptr(), v, 0, maxL);
      boolean haveLists = true;
      try {
        lk.ropeTable(cos.ptr(), sin.ptr(), invFreq.ptr(), listLen, d / 2);
      } catch (UnsupportedOperationException e) {
        haveLists = false;
        b.log().println("  tokenselect: ListKernels not merged yet, list-attention rows are NaN");
      }
      for (int L : contexts) {
        int cands = L - WINDOW - SINKS;
        SelectKernels.ScorePlan p = sk.plan(cands, nKv);
        String shape = "1x" + heads + "x1x" + d + " kv " + L + " k " + K;
        k.flashDecode(out.ptr(), q.ptr(), v, 1, heads, L - 1, 0, scale, ws);  // sizes the workspace
        double dense = b.medianMs(() -> k.flashDecode(out.ptr(), q.ptr(), v, 1, heads, L - 1, 0, scale, ws), 3, 15, 20);
        double kvBytes = 2.0 * L * c.kvDim() * 2;
        b.add(new Bench.Row("tokenselect", "dense decode attention L=" + L, shape, dense, Double.NaN, kvBytes / dense / 1e6,
            kvBytes / dense / 1e6 / b.copyGbps(), Double.NaN));

        boolean rotate = haveLists;
        // where ts_votes adds the top-k's first histogram: a scratch workspace while votes run without
        // the top-k that consumes it, the top-k's own workspace in the rows that run the whole step
        CUdeviceptr[] voteHist = {histScratch.ptr()};
        // fingerprint, cache check and the list-index query: one launch; possible: the cached top-k fits
        Consumer<Boolean> frontStep = possible -> sk.decodeFront(qf.ptr(), hit.ptr(), hits.ptr(),
            cachedQf.ptr(), rotate ? qRot.ptr() : null, qPre.ptr(), fpCos.ptr(), fpSin.ptr(), cos.ptr(), sin.ptr(),
            heads, d, listLen - 1, possible, true, 0.9);
        Runnable front = () -> frontStep.accept(false);  // a miss (stores the fingerprint)
        Runnable scoreFull = () -> {
          front.run();
          sk.score(logits.ptr(), partMl.ptr(), hit.ptr(), v, qf.ptr(), heads, SINKS, cands, p, false, 1f);
          sk.votes(votes.ptr(), voteHist[0], logits.ptr(), partMl.ptr(), hit.ptr(), heads, nKv, cands, p.splits(), false,
              false);
        };
        Runnable scoreInt4 = () -> {
          front.run();
          sk.scoreInt4(logits.ptr(), partMl.ptr(), hit.ptr(), kq.ptr(), ks.ptr(), qf.ptr(), heads, nKv, d, SINKS, cands,
              p, false, 1f);
          sk.votes(votes.ptr(), voteHist[0], logits.ptr(), partMl.ptr(), hit.ptr(), heads, nKv, cands, p.splits(), false,
              false);
        };
        Runnable topk = () -> {  // after votes that histogrammed into topWs (voteHist[0] == topWs)
          sk.topKLists(top.ptr(), lists.ptr(), votes.ptr(), hit.ptr(), topWs.ptr(), cand.ptr(), 1, cands, K, SINKS, WINDOW,
              L, true);
        };
        Runnable attend = () -> {  // the query was rotated by the front
          lk.attend(out.ptr(), qRot.ptr(), v, lists.ptr(), 1, listLen, 1, heads, true, cos.ptr(), sin.ptr(),
              invFreq.ptr(), scale);
        };
        Runnable hitStep = () -> {  // a front (a miss) stored this fingerprint: scoring and top-k return at once
          frontStep.accept(true);
          sk.score(logits.ptr(), partMl.ptr(), hit.ptr(), v, qf.ptr(), heads, SINKS, cands, p, false, 1f);
          sk.votes(votes.ptr(), voteHist[0], logits.ptr(), partMl.ptr(), hit.ptr(), heads, nKv, cands, p.splits(), false,
              false);
          topk.run();
          attend.run();
        };
        // the front alone: one block, on every decode step's critical path once per layer (in a graph: launched
        // alone from the host it would time the launch path)
        double msFront = b.graphMs(front, 20, 15);
        b.add(new Bench.Row("tokenselect", "decode front (fingerprint, cache check, list-index query) L=" + L
            + " in a CUDA graph", shape, msFront, Double.NaN, Double.NaN, Double.NaN, Double.NaN));
        scoreFull.run();  // votes for the top-k timing
        double msFull = b.medianMs(scoreFull, 3, 15, 20);
        double keyBytes = (double) cands * c.kvDim() * 2;
        b.add(new Bench.Row("tokenselect", "scoring full keys L=" + L, shape, msFull, Double.NaN, keyBytes / msFull / 1e6,
            keyBytes / msFull / 1e6 / b.copyGbps(), Double.NaN));
        double msInt4 = b.medianMs(scoreInt4, 3, 15, 20);
        double qBytes = (double) cands * nKv * (d / 2 + 4);
        b.add(new Bench.Row("tokenselect", "scoring int4 keys L=" + L, shape, msInt4, Double.NaN, qBytes / msInt4 / 1e6,
            qBytes / msInt4 / 1e6 / b.copyGbps(), Double.NaN));
        // the kernels alone (the hit flag stays 0 from the last front): where the scoring time goes
        front.run();
        double msKernel = b.medianMs(() -> sk.score(logits.ptr(), partMl.ptr(), hit.ptr(), v, qf.ptr(), heads, SINKS,
            cands, p, false, 1f), 3, 15, 20);
        double logitBytes = (double) heads * cands * 4;
        b.add(new Bench.Row("tokenselect", "score kernel full keys L=" + L, shape, msKernel, Double.NaN,
            (keyBytes + logitBytes) / msKernel / 1e6, (keyBytes + logitBytes) / msKernel / 1e6 / b.copyGbps(),
            Double.NaN));
        double msKernel4 = b.medianMs(() -> sk.scoreInt4(logits.ptr(), partMl.ptr(), hit.ptr(), kq.ptr(), ks.ptr(),
            qf.ptr(), heads, nKv, d, SINKS, cands, p, false, 1f), 3, 15, 20);
        b.add(new Bench.Row("tokenselect", "score kernel int4 keys L=" + L, shape, msKernel4, Double.NaN,
            (qBytes + logitBytes) / msKernel4 / 1e6, (qBytes + logitBytes) / msKernel4 / 1e6 / b.copyGbps(),
            Double.NaN));
        // the plan's one wave of about four blocks per SM against two and four waves of smaller splits (each
        // block's prologue then overlaps other blocks' streaming; the vote merges more splits)
        for (int waves : new int[] {2, 4}) {
          SelectKernels.ScorePlan pw = SelectKernels.scorePlan(cands, nKv, waves * k.smCount());
          double full = b.medianMs(() -> sk.score(logits.ptr(), partMl.ptr(), hit.ptr(), v, qf.ptr(), heads, SINKS,
              cands, pw, false, 1f), 3, 15, 20);
          double int4 = b.medianMs(() -> sk.scoreInt4(logits.ptr(), partMl.ptr(), hit.ptr(), kq.ptr(), ks.ptr(),
              qf.ptr(), heads, nKv, d, SINKS, cands, pw, false, 1f), 3, 15, 20);
          double vote = b.medianMs(() -> sk.votes(votes.ptr(), histScratch.ptr(), logits.ptr(), partMl.ptr(), hit.ptr(),
              heads, nKv, cands, pw.splits(), false, false), 3, 15, 20);
          String sweep = shape + ", " + pw.splits() + " splits of " + pw.chunk() + " (plan: " + p.splits() + ")";
          b.add(new Bench.Row("tokenselect", "score kernel full keys, " + waves + " waves L=" + L, sweep, full,
              Double.NaN, (keyBytes + logitBytes) / full / 1e6, (keyBytes + logitBytes) / full / 1e6 / b.copyGbps(),
              Double.NaN));
          b.add(new Bench.Row("tokenselect", "score kernel int4 keys, " + waves + " waves L=" + L, sweep, int4,
              Double.NaN, (qBytes + logitBytes) / int4 / 1e6, (qBytes + logitBytes) / int4 / 1e6 / b.copyGbps(),
              Double.NaN));
          b.add(new Bench.Row("tokenselect", "votes, " + waves + " waves of scoring splits L=" + L, sweep, vote,
              Double.NaN, Double.NaN, Double.NaN, Double.NaN));
        }
        scoreFull.run();  // the plan's logits and statistics again for the rows below (the top-k's input)
        Runnable votesAlone = () -> sk.votes(votes.ptr(), histScratch.ptr(), logits.ptr(), partMl.ptr(), hit.ptr(),
            heads, nKv, cands, p.splits(), false, false);
        double msVotes = b.medianMs(votesAlone, 3, 15, 20);
        b.add(new Bench.Row("tokenselect", "votes (+ the top-k's first histogram) L=" + L, shape, msVotes, Double.NaN,
            logitBytes / msVotes / 1e6, logitBytes / msVotes / 1e6 / b.copyGbps(), Double.NaN));
        // from here on the votes feed the top-k: every run of them is followed by one top-k
        voteHist[0] = topWs.ptr();
        Runnable votesTopk = () -> {
          sk.votes(votes.ptr(), topWs.ptr(), logits.ptr(), partMl.ptr(), hit.ptr(), heads, nKv, cands, p.splits(), false,
              false);
          topk.run();
        };
        double msPair = b.medianMs(votesTopk, 3, 15, 20);
        String topShape = shape + ", " + SelectKernels.topKBlocks(cands, 1, k.smCount()) + " blocks";
        b.add(new Bench.Row("tokenselect", "votes + top-k + list L=" + L, topShape, msPair, Double.NaN, Double.NaN,
            Double.NaN, Double.NaN));
        // the top-k alone needs the histogram of the votes just before it: its time is the pair's minus the votes'
        // (GB/s: one read of the votes)
        double msTop = msPair - msVotes;
        b.add(new Bench.Row("tokenselect", "top-k + list (votes + top-k minus votes) L=" + L, topShape, msTop,
            Double.NaN, cands * 4.0 / msTop / 1e6, cands * 4.0 / msTop / 1e6 / b.copyGbps(), Double.NaN));
        // as with max-pooled votes: the top-k builds its first histogram itself (one grid barrier more)
        double msOwn = b.medianMs(() -> sk.topKLists(top.ptr(), lists.ptr(), votes.ptr(), hit.ptr(), topWs.ptr(),
            cand.ptr(), 1, cands, K, SINKS, WINDOW, L, false), 3, 15, 20);
        b.add(new Bench.Row("tokenselect", "top-k + list, own first histogram (pooled path) L=" + L, topShape, msOwn,
            Double.NaN, cands * 4.0 / msOwn / 1e6, cands * 4.0 / msOwn / 1e6 / b.copyGbps(), Double.NaN));
        double msList = Double.NaN, msListGraph = Double.NaN, msListHot = Double.NaN, totFull = Double.NaN;
        double totInt4 = Double.NaN, totHit = Double.NaN;
        double totFullGraph = Double.NaN, totInt4Graph = Double.NaN, totHitGraph = Double.NaN;
        if (haveLists) {
          // list attention alone, cold: each call on another layer and lists (ColdLists), rows from HBM as in a
          // step; `attend` repeats one list, whose rows stay in L2 (the hot row, for reference only)
          try (ColdLists cold = new ColdLists(ctx, k, c, L, L)) {
            Runnable coldAttend = () -> {
              int i = cold.advance();
              lk.attend(out.ptr(), qRot.ptr(), cold.view(i), cold.lists(i), 1, listLen, 1, heads, true, cos.ptr(),
                  sin.ptr(), invFreq.ptr(), scale);
            };
            coldAttend.run();  // sizes the scratch (a graph capture must not allocate)
            msList = b.medianMs(coldAttend, 3, 15, 20);
            // the host's launch path (~10 us a call) can exceed the kernel: the graph shows the GPU's time alone
            msListGraph = b.graphMs(coldAttend, 20, 15);
          } catch (RuntimeException e) {
            b.log().println("  tokenselect: cold list attention at L=" + L + " skipped: " + e);
          }
          msListHot = b.medianMs(attend, 3, 15, 20);
          Runnable stepFull = () -> {
            scoreFull.run();
            topk.run();
            attend.run();
          };
          Runnable stepInt4 = () -> {
            scoreInt4.run();
            topk.run();
            attend.run();
          };
          totFull = b.medianMs(stepFull, 3, 15, 20);
          totInt4 = b.medianMs(stepInt4, 3, 15, 20);
          totHit = b.medianMs(hitStep, 3, 15, 20);
          // the same steps in CUDA graphs: the GPU's time without the host's launch path (a hit step's five
          // launches cost the host more than the GPU's work)
          totFullGraph = b.graphMs(stepFull, 10, 15);
          totInt4Graph = b.graphMs(stepInt4, 10, 15);
          totHitGraph = b.graphMs(hitStep, 10, 15);
        }
        b.add(new Bench.Row("tokenselect", "list attention cold (" + ColdLists.ROTATE + " rotating layers + lists) L=" + L,
            shape, msList, Double.NaN, ColdLists.listBytes(c) / msList / 1e6, Double.NaN, Double.NaN));
        b.add(new Bench.Row("tokenselect", "list attention cold (" + ColdLists.ROTATE + " rotating layers + lists) L=" + L
            + " in a CUDA graph (no host launch cost)", shape, msListGraph, Double.NaN,
            ColdLists.listBytes(c) / msListGraph / 1e6, Double.NaN, Double.NaN));
        b.add(new Bench.Row("tokenselect", "list attention hot (one list repeated, rows in L2) L=" + L, shape, msListHot,
            Double.NaN, Double.NaN, Double.NaN, Double.NaN));
        b.add(new Bench.Row("tokenselect", "total full-key no hit L=" + L, shape, totFull, Double.NaN, Double.NaN,
            Double.NaN, Double.NaN));
        b.add(new Bench.Row("tokenselect", "total int4 no hit L=" + L, shape, totInt4, Double.NaN, Double.NaN, Double.NaN,
            Double.NaN));
        b.add(new Bench.Row("tokenselect", "total cache hit L=" + L, shape, totHit, Double.NaN, Double.NaN, Double.NaN,
            Double.NaN));
        b.add(new Bench.Row("tokenselect", "total full-key no hit L=" + L + " in a CUDA graph", shape, totFullGraph,
            Double.NaN, Double.NaN, Double.NaN, Double.NaN));
        b.add(new Bench.Row("tokenselect", "total int4 no hit L=" + L + " in a CUDA graph", shape, totInt4Graph,
            Double.NaN, Double.NaN, Double.NaN, Double.NaN));
        b.add(new Bench.Row("tokenselect", "total cache hit L=" + L + " in a CUDA graph", shape, totHitGraph,
            Double.NaN, Double.NaN, Double.NaN, Double.NaN));
        ratio(b, "list attention (cold, CUDA graph)", L, dense, msListGraph, 25);
        ratio(b, "list attention (cold, stream launches)", L, dense, msList, Double.NaN);
        ratio(b, "total full-key no hit", L, dense, totFull, 1.7);
        ratio(b, "total int4 no hit", L, dense, totInt4, 5);
        ratio(b, "total cache hit", L, dense, totHit, Double.NaN);
        ratio(b, "total full-key no hit (CUDA graph)", L, dense, totFullGraph, Double.NaN);
        ratio(b, "total int4 no hit (CUDA graph)", L, dense, totInt4Graph, Double.NaN);
        ratio(b, "total cache hit (CUDA graph)", L, dense, totHitGraph, Double.NaN);
        ratio(b, "scoring full keys", L, dense, msFull, Double.NaN);
        ratio(b, "scoring int4 keys", L, dense, msInt4, Double.NaN);
      }
    }
  }

  /** A ratio row (dense ms / part ms in the fraction column); the target is logged at 128K. */
  private static void ratio(Bench b, String what, int L, double dense, double ms, double target) {
    double x = dense / ms;
    b.add(new Bench.Row("tokenselect", "speedup vs dense: " + what + " L=" + L, "dense ms / ms", Double.NaN, Double.NaN,
        Double.NaN, x, Double.NaN));
    if (L >= 131072 && !Double.isNaN(target)) {
      b.log().printf(Locale.ROOT, "  target %s >= %.1fx at 128K: %.2fx (%s)%n", what, target, x,
          x >= target ? "met" : Double.isNaN(x) ? "not measured" : "NOT met");
    }
  }
}
