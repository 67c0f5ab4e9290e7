package io.longsieve.engine;

import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.engine.spi.RequestLimits;
import io.longsieve.engine.spi.Sampler;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyStats;
import io.longsieve.policy.PrefixReuse;
import io.longsieve.structured.JsonCursor;
import java.util.Arrays;

/**
 * One request's generation as a state machine that a driver steps: {@link #open}, then
 * {@link #prefillStep} (one prompt part each) while {@link #prefilling()}, then decode steps until
 * {@link #done()}. A decode step runs the model on {@link #nextToken()} at {@link #nextPosition()},
 * alone ({@link #decodeAlone}) or batched with other tasks' steps ({@link ModelRunner#decodeBatch}),
 * and hands the picked token to {@link #accept}. The semantics are those of one request run alone:
 * its own seeded {@link Sampler}, end-of-sequence ids, stop strings, maxNewTokens, the context
 * limit, its {@link RequestLimits} (deadline, prefill chunk) and the same statistics.
 *
 * <p>A request with a JSON schema carries a {@link JsonCursor}: before every pick its sampler gets the
 * mask of the tokens that keep the output a prefix of a valid document (a backend that samples on the
 * device applies it there), and the request ends as soon as the document is complete
 * ({@link FinishReason#JSON_COMPLETE}, or EOS where the document could go on, e.g. a top-level number);
 * its text is the JSON bytes the cursor took. Stop strings and minNewTokens do not apply to it.
 * A constrained request takes part in prefix reuse like any other: the mask acts on picks only, after
 * the prompt, and a kept prefix holds prompt KV alone, so forks with and without a schema (or with
 * other schemas) share it and each gets what it gets alone (PrefixReuseTest holds it).
 *
 * <p>Failure semantics: the constructor throws {@link PromptTooLongException} or
 * {@link IllegalArgumentException} (unknown policy, empty prompt) before anything runs; a step
 * throws {@link GenerationTimeoutException} past the deadline, or whatever the backend threw. After
 * a throw the task is dead: its driver closes it, which frees its sequence. Not thread-safe: one
 * driver thread at a time.
 */
public final class GenerationTask implements AutoCloseable {

  private final LoadedModel model;
  private final ModelRunner runner;
  private final GenerationRequest request;
  private final RequestLimits limits;
  private final PolicySpec policy;
  private final int[] prompt;
  private final int capacity;      // prompt + output slots the sequence reserves
  private final long t0;           // request start (before tokenizing)
  private final float[] logits;    // (vocab) this request's scratch
  private final int[] out;         // (capacity - prompt) generated ids
  private final Sampler sampler;
  private final JsonCursor json;    // null: free text
  private final SharedPrefix shared; // what the caller says the prompt shares with other requests
  private PrefixCache.Key prefixKey; // the prefix it may reuse or keep (null: none), once asked
  private boolean prefixPlanned;
  private int keepAt;              // keep the prefix once this many prompt tokens are cached; 0: none
  private int reused;              // prompt tokens taken from a kept prefix
  private ModelRunner.Sequence seq; // open between open() and the end
  private int prefilled;           // prompt tokens run so far
  private boolean prefillDone;
  private int produced;
  private long batchedSequences, batchedSteps; // decode steps this request was in, and their sizes summed
  private double prefillMs;
  // attention_ms and selection_ms as the prefill left them: the one span both backends time alike (the
  // CUDA backend cannot time each decode step's attention without costing more than it measures)
  private double prefillAttentionMs, prefillSelectionMs;
  private double ttftMs;
  private long td;                 // nanoTime of the first token
  private long kvBefore;
  private long kvAfter;
  private GenerationResult result; // set when done

  GenerationTask(LoadedModel model, ModelRunner runner, int maxContext, PolicySpec defaultPolicy, GenerationRequest r,
                 RequestLimits limits, JsonCursor json, SharedPrefix shared) {
    this.t0 = System.nanoTime();
    this.shared = shared;
    this.model = model;
    this.runner = runner;
    this.request = r;
    this.limits = limits;
    this.policy = r.policy() != null ? r.policy() : defaultPolicy;
    this.prompt = PromptTokens.checked(model, r, maxContext); // a prepared request's ids as they are
    this.capacity = (int) Math.min((long) prompt.length + Math.max(r.maxNewTokens(), 1), maxContext);
    int vocab = model.config().vocabSize();
    this.logits = new float[vocab];
    this.out = new int[capacity - prompt.length];
    this.sampler = new Sampler(r.sampling(), vocab);
    this.json = json;
    if (json != null) sampler.constrain(json.allowed()); // the first pick, after the prefill
  }

  public GenerationRequest request() {
    return request;
  }

  /** Token slots the sequence reserves: prompt + maxNewTokens (at least one), within the context. */
  public int capacity() {
    return capacity;
  }

  /** Opens the backend sequence (allocates its KV cache). */
  public void open() {
    seq = runner.open(capacity, policy);
  }

  /**
   * The kept prefix this request may start from or keep (prefix reuse): the prompt's first tokens as
   * far as its shared count and its policy allow ({@link PrefixReuse}), under the policy's state key;
   * null when none, or when the prefix alone would take more than {@code budgetBytes}. Decided once,
   * under the request's limits (a smaller prefill chunk moves where a prefix may end).
   */
  PrefixCache.Key prefixKey(long budgetBytes) {
    if (prefixPlanned) return prefixKey;
    prefixPlanned = true;
    if (shared.tokens() <= 0) return null;
    prefixKey = limits.with(() -> {
      PrefixReuse.Cuts cuts = runner.prefixCuts();
      if (cuts == null) return null;
      int tokens = PrefixReuse.reusableTokens(policy, shared.tokens(), prompt.length, cuts);
      if (tokens <= 0 || (double) tokens * runner.kvBytesPerSlot() > budgetBytes) return null;
      // the RoPE table too where it follows the prompt's length (dynamic NTK, LongRoPE)
      String state = PrefixReuse.stateKey(policy, cuts, model.config(), prompt.length);
      return new PrefixCache.Key(state, Arrays.copyOf(prompt, tokens));
    });
    return prefixKey;
  }

  /** Who kept the prefix this request shares (the caller's scope). */
  String prefixScope() {
    return shared.scope();
  }

  /** Opens the sequence as a fork of a kept prefix: its prefill goes on after the prefix's tokens. */
  void openFork(ModelRunner.KeptPrefix prefix) {
    seq = runner.openFork(capacity, policy, prefix);
    prefilled = prefix.tokens();
    reused = prefix.tokens();
  }

  /** Makes this request stop its prefill after {@code tokens} prompt tokens once, for {@link #keepPrefix}. */
  void keepAfter(int tokens) {
    keepAt = tokens;
  }

  /** Whether the prefill has just reached the tokens {@link #keepAfter} asked to keep. */
  boolean atKeepPoint() {
    return keepAt > 0 && prefilled == keepAt;
  }

  /** Keeps the prompt prefix cached so far (at {@link #atKeepPoint}); the prefill then goes on. */
  ModelRunner.KeptPrefix keepPrefix() {
    int tokens = keepAt;
    keepAt = 0;
    return seq.keepPrefix(tokens);
  }

  public boolean prefilling() {
    return !prefillDone;
  }

  public boolean done() {
    return result != null;
  }

  /** Runs the next prompt part (the backend's chunk, or the request's smaller one); the last one picks the first token. */
  public void prefillStep() {
    limits.with(() -> {
      limits.check();
      int step = Math.max(1, seq.prefillPartTokens());
      int to = (int) Math.min((long) prefilled + step, prompt.length);
      if (keepAt > prefilled) to = Math.min(to, keepAt); // a part ends where the kept prefix does
      int next = seq.prefillPart(prompt, prefilled, to, logits, sampler);
      prefilled = to;
      if (to == prompt.length) afterPrefill(next);
      return null;
    });
  }

  private void afterPrefill(int first) {
    long now = System.nanoTime();
    prefillMs = ms(now - t0);
    kvBefore = seq.kvBytesBeforeCompression();
    kvAfter = seq.kvBytesAfterCompression();
    prefillAttentionMs = seq.attentionMs();
    prefillSelectionMs = seq.policyStats().selectionMs();
    td = now;
    prefillDone = true;
    if (request.maxNewTokens() == 0) finish(FinishReason.LENGTH, null);
    else accept(first);
  }

  /** @throws GenerationTimeoutException when the request is past its deadline */
  public void checkDeadline() {
    limits.check();
  }

  /** The token the next decode step runs (the last one picked). */
  public int nextToken() {
    return out[produced - 1];
  }

  /** Its position. */
  public int nextPosition() {
    return prompt.length + produced - 1;
  }

  public ModelRunner.Sequence sequence() {
    return seq;
  }

  public float[] logits() {
    return logits;
  }

  public Sampler sampler() {
    return sampler;
  }

  /** One decode step of this request alone, under its limits. */
  public void decodeAlone() {
    limits.with(() -> {
      limits.check();
      countDecodeStep(1);
      accept(seq.decodeNext(nextToken(), nextPosition(), logits, sampler));
      return null;
    });
  }

  /** Takes a picked token: records it, then ends on EOS (from minNewTokens on), a stop string, maxNewTokens or a full context. */
  public void accept(int token) {
    out[produced++] = token;
    if (produced == 1) {
      ttftMs = ms(System.nanoTime() - t0);
      td = System.nanoTime();
    }
    if (json != null) {
      acceptJson(token);
      return;
    }
    if (model.eosIds().contains(token) && produced >= request.minNewTokens()) {
      finish(FinishReason.EOS, null);
      return;
    }
    if (!request.stopStrings().isEmpty()) {
      String sofar = model.tokenizer().decode(out, 0, produced, true);
      int cut = firstStop(sofar, request);
      if (cut >= 0) {
        finish(FinishReason.STOP_STRING, sofar.substring(0, cut));
        return;
      }
    }
    if (produced >= request.maxNewTokens()) finish(FinishReason.LENGTH, null);
    else if (prompt.length + produced >= capacity) finish(FinishReason.CONTEXT_FULL, null);
  }

  /** A token of a JSON-schema request: the cursor takes it (it was allowed), then the document may be complete. */
  private void acceptJson(int token) {
    boolean eos = model.eosIds().contains(token);
    json.accept(token);
    if (json.complete()) {
      finish(eos ? FinishReason.EOS : FinishReason.JSON_COMPLETE, json.text());
    } else if (produced >= request.maxNewTokens()) {
      finish(FinishReason.LENGTH, json.text());
    } else if (prompt.length + produced >= capacity) {
      finish(FinishReason.CONTEXT_FULL, json.text());
    } else {
      sampler.constrain(json.allowed());
    }
  }

  /** Whether this request's output is held to a JSON schema. */
  public boolean constrained() {
    return json != null;
  }

  private void finish(FinishReason finish, String stopText) {
    double decodeMs = produced > 1 ? ms(System.nanoTime() - td) : 0;
    int[] ids = Arrays.copyOf(out, produced);
    String text = stopText != null ? stopText : model.tokenizer().decode(ids, true);
    double ttft = request.maxNewTokens() == 0 ? prefillMs : ttftMs;
    PolicyStats ps = seq.policyStats();
    // the policy's counters with the two values the engine measures: KV bytes as allocated, selection in the prefill only
    PolicyStats measured = new PolicyStats(ps.attendedTokensMean(), ps.selectedFractionByLayer(), ps.selectionCacheHitRate(),
        kvAfter, ps.sparseLayers(), prefillSelectionMs);
    double totalMs = ms(System.nanoTime() - t0);
    GenerationStats stats = new GenerationStats(prompt.length, produced, ttft, prefillMs, decodeMs, totalMs,
        runner.backend(), runner.device(), policy.canonical(), seq.policyResolved(), measured, kvBefore,
        Math.max(0, prefillAttentionMs - prefillSelectionMs), batchedSteps == 0 ? Double.NaN : (double) batchedSequences / batchedSteps,
        reused);
    result = new GenerationResult(request.id(), text, ids, finish, stats);
    close();
  }

  /** Counts one decode step of {@code sequences} sequences (this one included) that this request took part in. */
  void countDecodeStep(int sequences) {
    batchedSequences += sequences;
    batchedSteps++;
  }

  /** The result once {@link #done()}. */
  public GenerationResult result() {
    if (result == null) throw new IllegalStateException("request " + request.id() + " has not finished");
    return result;
  }

  /** Frees the sequence; safe to call more than once and after a failure. */
  @Override
  public void close() {
    if (seq != null) {
      ModelRunner.Sequence s = seq;
      seq = null;
      s.close();
    }
  }

  private static int firstStop(String text, GenerationRequest r) {
    int best = -1;
    for (String s : r.stopStrings()) {
      if (s.isEmpty()) continue;
      int i = text.indexOf(s);
      if (i >= 0 && (best < 0 || i < best)) best = i;
    }
    return best;
  }

  private static double ms(long nanos) {
    return nanos / 1e6;
  }
}
