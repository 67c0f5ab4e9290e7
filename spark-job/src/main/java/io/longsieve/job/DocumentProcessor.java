package io.longsieve.job;

import io.longsieve.engine.DenseReference;
import io.longsieve.engine.Engine;
import io.longsieve.engine.Fidelity;
import io.longsieve.engine.FidelityMeter;
import io.longsieve.engine.GenerationRequest;
import io.longsieve.engine.GenerationResult;
import io.longsieve.engine.GenerationStats;
import io.longsieve.policy.PolicyStats;
import io.longsieve.engine.PromptTooLongException;
import io.longsieve.engine.SharedPrefix;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.SamplingParams;
import io.longsieve.job.PromptBuilder.Document;
import io.longsieve.job.PromptBuilder.Prompt;
import io.longsieve.model.ChatTemplate;
import io.longsieve.policy.PolicySpec;
import io.longsieve.structured.OutputSchema;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.StructType;

/**
 * The generation stage: one {@link JobSchemas#RESULT} row per {@link JobSchemas#PARSED} row, the
 * model run once per document.
 *
 * <p>Failure semantics: a row that arrives with a status (bad_input, duplicate_id) passes through
 * without touching the engine; a prompt over the context is too_long (or cut, with --truncate); out
 * of memory is retried with smaller prefill chunks and then becomes an oom row, a document past the
 * time limit a timeout row, and a sticky CUDA error ends the executor with exit code 45 so Spark
 * retries the task elsewhere (all three: {@link DocumentAttempts}); any other exception while
 * generating one document becomes an engine_error row with the exception's message, and the task
 * goes on with the next document. Only a failure to open the engine (see {@link ExecutorEngine}) or
 * another JVM Error fails the task, for Spark to retry. Rows are produced lazily, one document at a
 * time, so a partition never holds all its outputs in memory. Each finished document adds to the
 * {@link JobMetrics} accumulators (progress only; the rows are the record).
 *
 * <p>Prefix reuse: a row whose shared head ({@link #sharedHead}) equals its neighbour's in the
 * partition (the plan put them together, in order) tells the engine how many prompt tokens it shares
 * ({@link SharedPrefix}), and the partition's kept prefixes are released when it ends. A row that
 * fails is a row like any other: its neighbours still get what they get alone.
 */
final class DocumentProcessor implements MapPartitionsFunction<Row, Row> {

  private static final Logger LOG = LogManager.getLogger(DocumentProcessor.class);

  private final EngineSpec spec;
  private final String runId;
  private final int maxNewTokens;
  private final PolicySpec policy;
  private final boolean truncate;
  private final DocumentAttempts attempts;
  private final JobMetrics metrics; // null: no accumulators (tests)
  private final CostModel cost;
  private final double charsPerToken;
  private final GenerationOptions generation;
  private final PolicySpec fidelityOf; // null; or, in the shadow audit's dense pass, the run's policy measured against dense
  private static final int STATUS = JobSchemas.RESULT.fieldIndex("status");
  private static final int IN_TOKENS = JobSchemas.RESULT.fieldIndex("input_tokens");
  private static final int OUT_TOKENS = JobSchemas.RESULT.fieldIndex("output_tokens");
  private static final int REUSED = JobSchemas.RESULT.fieldIndex("prefix_tokens_reused");

  DocumentProcessor(RunOptions o) {
    this(o, null, CostModel.defaults(o.policy()));
  }

  /** @param cost the driver's cost model (GenerationStage), so progress counts what the plan counted */
  DocumentProcessor(RunOptions o, JobMetrics metrics, CostModel cost) {
    this(o.engineSpec(), o.runId(), o.maxNewTokens(), o.policy(), o.truncate(),
        new DocumentAttempts(o.production().docTimeoutSeconds(), o.prefillChunk(), o.production().injectOomDocId(),
            o.production().injectStickyCudaError()),
        metrics, cost, o.production().charsPerToken(), o.generation());
  }

  DocumentProcessor(EngineSpec spec, String runId, int maxNewTokens, PolicySpec policy, boolean truncate) {
    this(spec, runId, maxNewTokens, policy, truncate, GenerationOptions.DEFAULTS);
  }

  DocumentProcessor(EngineSpec spec, String runId, int maxNewTokens, PolicySpec policy, boolean truncate,
      GenerationOptions generation) {
    this(spec, runId, maxNewTokens, policy, truncate, new DocumentAttempts(0, spec.prefillChunk(), null), null,
        CostModel.defaults(policy), CostModel.DEFAULT_CHARS_PER_TOKEN, generation);
  }

  private DocumentProcessor(EngineSpec spec, String runId, int maxNewTokens, PolicySpec policy, boolean truncate,
      DocumentAttempts attempts, JobMetrics metrics, CostModel cost, double charsPerToken,
      GenerationOptions generation) {
    this(spec, runId, maxNewTokens, policy, truncate, attempts, metrics, cost, charsPerToken, generation, null);
  }

  private DocumentProcessor(EngineSpec spec, String runId, int maxNewTokens, PolicySpec policy, boolean truncate,
      DocumentAttempts attempts, JobMetrics metrics, CostModel cost, double charsPerToken,
      GenerationOptions generation, PolicySpec fidelityOf) {
    this.fidelityOf = fidelityOf;
    this.generation = generation;
    this.spec = spec;
    this.runId = runId;
    this.maxNewTokens = maxNewTokens;
    this.policy = policy;
    this.truncate = truncate;
    this.attempts = attempts;
    this.metrics = metrics;
    this.cost = cost;
    this.charsPerToken = charsPerToken;
  }

  /**
   * This processor (the shadow audit's dense pass) also measuring {@code policy} against each dense answer
   * ({@link FidelityMeter}: dense greedy continuation, then the policy teacher-forced along it; two more runs per
   * document): its rows are {@link JobSchemas#AUDIT_DENSE_RESULT}, RESULT plus kl_mean, kl_max and top1_agreement
   * (null where the document did not run or the measurement failed).
   */
  DocumentProcessor measuringFidelityOf(PolicySpec policy) {
    return new DocumentProcessor(spec, runId, maxNewTokens, this.policy, truncate, attempts, metrics, cost, charsPerToken,
        generation, policy);
  }

  /** The schema of the rows this processor writes. */
  StructType schema() {
    return fidelityOf == null ? JobSchemas.RESULT : JobSchemas.AUDIT_DENSE_RESULT;
  }

  @Override
  public Iterator<Row> call(Iterator<Row> rows) {
    TaskContext tc = TaskContext.get();
    return call(rows, tc == null ? -1 : tc.partitionId());
  }

  /**
   * The rows of plan partition {@code partition}: the generation stage passes the partition's index
   * in the cost plan, which is unique in a run, not the task's partition id, which restarts at 0 in
   * every commit slice.
   */
  public Iterator<Row> call(Iterator<Row> rows, int partition) {
    String executor = SparkEnv.get() == null ? "driver" : SparkEnv.get().executorId();
    TaskContext tc = TaskContext.get();
    SharedPrefixes.Partition sharing = new SharedPrefixes.Partition(
        "partition " + partition + " task " + (tc == null ? "-" : tc.taskAttemptId()));
    SharedPrefixes.Neighbours neighbours = new SharedPrefixes.Neighbours(rows, this::sharedHead);
    return new Iterator<>() {
      private boolean counted; // hasNext() may be asked again after the end: log the counters once

      @Override
      public boolean hasNext() {
        boolean more = neighbours.hasNext();
        if (!more && !counted) {
          counted = true;
          if (sharing.reachedEngine) ExecutorEngine.get(spec).releasePrefixes(sharing.scope);
          ExecutorEngine.logCounters("partition " + partition + " done"); // batching, seen per executor
        }
        return more;
      }

      @Override
      public Row next() {
        Row in = neighbours.next();
        return process(in, executor, partition, () -> ExecutorEngine.get(spec), neighbours.shares() ? sharing : null);
      }
    };
  }

  /**
   * The row's shared head (key and length) when prefix reuse is on and it has one worth grouping: a
   * row with a prompt template (not a conversation) and no status, whose text up to its first per-row
   * placeholder is at least one prefill chunk long (estimated). Null otherwise. The driver groups by it.
   */
  SharedPrefixes.Head sharedHead(Row in) {
    if (spec.prefixCacheBytes() == 0 || in.getAs("status") != null) return null;
    Settings set = settings(in);
    String head = headText(in, set);
    if (head == null) return null;
    return SharedPrefixes.of(set.system, set.raw, head, (long) Math.ceil(spec.prefillChunk() * charsPerToken));
  }

  /** The text of the row's prompt before its first per-row placeholder; null for a conversation or a row missing a value. */
  private static String headText(Row in, Settings set) {
    if (set.template == null) return null;
    try {
      return set.template.sharedHead(values(in)::get);
    } catch (IllegalArgumentException e) {
      return null; // a placeholder with no value: the row becomes bad_input when it is built
    }
  }

  private static PromptBuilder.Values values(Row in) {
    return new PromptBuilder.Values(in.getAs("text"), documents(in), in.getAs("question"), fields(in));
  }

  /** One document, start to finish, counted in the progress accumulators. */
  Row process(Row in, String executor, int partition) {
    return process(in, executor, partition, () -> ExecutorEngine.get(spec));
  }

  /** {@link #process} on the engine {@code engines} gives, asked only for a row that reaches it (tests pass their own). */
  Row process(Row in, String executor, int partition, Supplier<Engine> engines) {
    return process(in, executor, partition, engines, null);
  }

  /** As above for a row that shares its head with a neighbour of the partition ({@code sharing}; null: none). */
  Row process(Row in, String executor, int partition, Supplier<Engine> engines, SharedPrefixes.Partition sharing) {
    Row r = processOne(in, executor, partition, engines, sharing);
    if (metrics != null) { // the run's own documents (not the shadow audit's second run)
      LongSieveMetrics.record(r);
      Integer inTokens = (Integer) r.get(IN_TOKENS);
      Integer outTokens = (Integer) r.get(OUT_TOKENS);
      long size = in.getAs("size");
      Integer own = in.getAs("max_new_tokens"); // as the plan priced it (GenerationStage.build)
      Integer reused = (Integer) r.get(REUSED);
      double estimated = GenerationStage.estimatedCost(cost, size, own != null ? own : maxNewTokens, charsPerToken,
          in.getAs("status") != null);
      // a row that started from its group's prefix costs what the plan counted for it: the prefill less the prefix's
      if (reused != null && reused > 0) estimated = Math.max(1, estimated - cost.prefillCost(reused));
      metrics.record(JobSchemas.OK.equals(r.get(STATUS)), inTokens == null ? 0 : inTokens,
          outTokens == null ? 0 : outTokens, estimated);
    }
    return r;
  }

  private Row processOne(Row in, String executor, int partition, Supplier<Engine> engines,
                         SharedPrefixes.Partition sharing) {
    long t0 = System.nanoTime();
    Out out = new Out(in);
    out.policy = policy.canonical(); // canonical on every row, ok and error alike
    String status = in.getAs("status");
    if (status != null) return out.error(status, in.getAs("error")).row(schema(), runId, executor, partition, t0);
    Engine engine = engines.get();
    out.backend = engine.backend();
    out.device = engine.device();
    try {
      attempts.run(in.getAs("doc_id"), () -> {
        generate(engine, in, out, sharing);
        return null;
      });
    } catch (DocumentAttempts.Failed e) {
      out.error(e.status(), e.getMessage());
    } catch (PromptTooLongException e) {
      out.tooLong(e, ""); // not expected: generate runs prepared requests, checked already
    } catch (RuntimeException e) {
      out.error(JobSchemas.ENGINE_ERROR, e.getClass().getSimpleName() + ": " + e.getMessage());
    }
    return out.row(schema(), runId, executor, partition, t0);
  }

  /**
   * The shadow audit's dense pass only: the run's policy against this dense answer's prompt. A failure (a policy
   * the backend cannot drive, memory, the time limit) leaves the columns null and the dense row as it is; a sticky
   * device error goes up to {@link DocumentAttempts}, which ends the executor.
   */
  private void measureFidelity(Engine engine, GenerationRequest request, Out out) {
    if (fidelityOf == null) return;
    try {
      DenseReference ref = FidelityMeter.reference(engine, request);
      out.fidelity = FidelityMeter.measure(engine, request, fidelityOf, ref, 0);
    } catch (RuntimeException e) {
      // a poisoned device must still end the executor, as it would for the answer itself
      if (DocumentAttempts.classify(e) == DocumentAttempts.Kind.STICKY_DEVICE) throw e;
      LOG.warn("{}: the fidelity measurement against dense failed: {}", out.docId, e.toString());
    }
  }

  private void generate(Engine engine, Row in, Out out, SharedPrefixes.Partition sharing) {
    Settings set = settings(in);
    out.settings = set;
    if (set.template == null) {
      conversation(engine, in, out, set);
      return;
    }
    Prompt prompt = PromptBuilder.build(set.template, new PromptBuilder.Values(in.getAs("text"), documents(in),
        in.getAs("question"), fields(in)));
    String id = in.getAs("doc_id");
    GenerationRequest request;
    try {
      // tokenized once here, the count and the context check for the row; generate runs these ids
      request = engine.prepare(request(id, prompt, set));
    } catch (PromptTooLongException e) {
      if (!truncate) {
        out.tooLong(e, " (run with --truncate to keep the head and tail of the document)");
        return;
      }
      int limit = e.limit();
      // leave room for the answer, at most a quarter of the context
      int budget = limit - Math.max(1, Math.min(set.maxNewTokens, limit / 4));
      PromptTruncator.Truncated t = PromptTruncator.fit(prompt, budget, engine.model().tokenizer(),
          p -> engine.promptTokens(request(id, p, set)).length);
      if (t == null) {
        out.tooLong(e, ", and the instruction and question alone do not fit " + budget + " tokens");
        return;
      }
      request = engine.prepare(request(id, t.prompt(), set)); // fits: within the budget
      out.notes = t.note();
    }
    if (sharing == null) {
      out.ok(engine.generate(request));
    } else {
      sharing.reachedEngine = true;
      String head = headText(in, set);
      int shared = head == null ? 0
          : sharing.sharedTokens(request.promptIds(), head, h -> engine.promptTokens(request(id, new Prompt(h, "", ""), set)));
      out.ok(engine.generate(request, new SharedPrefix(shared, sharing.scope)));
    }
    measureFidelity(engine, request, out); // driven runs alone, from a fresh cache: no kept prefix is taken
  }

  /**
   * A row's {@code messages}: the model's chat template renders the whole conversation (the run's or
   * row's system message first, unless the conversation has its own), and those ids are the prompt.
   * A conversation has no document part, so --truncate cannot cut it: over the context it is too_long.
   */
  private void conversation(Engine engine, Row in, Out out, Settings set) {
    List<ChatTemplate.Message> turns = new ArrayList<>();
    List<Row> messages = in.getList(in.fieldIndex("messages"));
    if (set.system != null && !messages.get(0).getString(0).equals("system")) {
      turns.add(new ChatTemplate.Message("system", set.system));
    }
    for (Row m : messages) turns.add(new ChatTemplate.Message(m.getString(0), m.getString(1)));
    ChatTemplate template = engine.model().chatTemplate();
    String text = template.render(turns);
    int[] ids = engine.model().tokenizer().encode(text, !template.hasTemplate()); // a real template writes BOS itself
    GenerationRequest r = GenerationRequest.raw(in.getAs("doc_id"), text, set.maxNewTokens).withPromptIds(ids)
        .withSampling(set.sampling).withStopStrings(set.stop).withPolicy(policy).withJsonSchema(set.jsonSchema);
    try {
      r = engine.prepare(r);
    } catch (PromptTooLongException e) {
      out.tooLong(e, " (--truncate cuts documents, not conversations)");
      return;
    }
    out.ok(engine.generate(r));
    measureFidelity(engine, r, out);
  }

  /**
   * What one row is generated with: its own values over the run's ({@link RowSettings}, {@link GenerationOptions}).
   * {@code template} is null for a row of {@code messages}.
   */
  record Settings(PromptTemplate template, String promptSource, String system, boolean raw, int maxNewTokens,
      SamplingParams sampling, List<String> stop, OutputSchema jsonSchema) {}

  Settings settings(Row in) {
    String own = in.getAs("prompt");
    PromptTemplate template;
    String source;
    if (!in.isNullAt(in.fieldIndex("messages"))) {
      template = null; // the conversation is the prompt
      source = "messages";
    } else if (own != null) {
      template = PromptTemplate.parse(own); // the parser checked it
      source = "row";
    } else if (generation.promptTemplate() != null) {
      template = generation.promptTemplate();
      source = "run";
    } else {
      boolean docs = in.getAs("text") == null;
      String task = in.getAs("task");
      template = PromptBuilder.preset(task, docs);
      source = "preset:" + (docs && PromptBuilder.PRESETS.containsKey(task + "_documents") ? task + "_documents" : task);
    }
    String system = in.getAs("system");
    Boolean raw = in.getAs("raw");
    Integer maxNew = in.getAs("max_new_tokens");
    Double temperature = in.getAs("temperature");
    Double topP = in.getAs("top_p");
    Long seed = in.getAs("seed");
    List<String> stop = in.isNullAt(in.fieldIndex("stop")) ? generation.stop() : in.getList(in.fieldIndex("stop"));
    String ownSchema = in.getAs("json_schema");
    OutputSchema schema = ownSchema != null ? OutputSchema.parse(ownSchema) : generation.jsonSchema(); // the parser checked it
    return new Settings(template, source, system != null ? system : generation.system(),
        raw != null ? raw : generation.raw(), maxNew != null ? maxNew : maxNewTokens,
        new SamplingParams(temperature != null ? temperature : generation.temperature(),
            topP != null ? topP : generation.topP(), seed != null ? seed : generation.seed()),
        List.copyOf(stop), schema);
  }

  private GenerationRequest request(String id, Prompt prompt, Settings set) {
    GenerationRequest r = set.raw ? GenerationRequest.raw(id, prompt.text(), set.maxNewTokens)
        : GenerationRequest.chat(id, prompt.text(), set.maxNewTokens);
    if (set.system != null) r = r.withSystem(set.system);
    return r.withSampling(set.sampling).withStopStrings(set.stop).withPolicy(policy).withJsonSchema(set.jsonSchema);
  }

  private static Map<String, String> fields(Row in) {
    int i = in.fieldIndex("fields");
    return in.isNullAt(i) ? Map.of() : in.getJavaMap(i);
  }

  private static List<Document> documents(Row in) {
    List<Row> docs = in.getList(in.fieldIndex("documents"));
    if (docs == null) return null;
    List<Document> out = new ArrayList<>(docs.size());
    for (Row d : docs) out.add(new Document(d.getString(0), d.getString(1)));
    return out;
  }

  /** The fields of one RESULT row as they are filled in. */
  private static final class Out {
    final String docId;
    final String task;
    final String reference;
    final String source;
    String status = JobSchemas.OK;
    String error;
    String notes;
    String output;
    Integer inputTokens;
    Integer outputTokens;
    String finishReason;
    String backend;
    String device;
    String policy;
    String policyResolved;
    GenerationStats stats;
    Settings settings; // null where the row never reached the engine
    Fidelity fidelity; // the shadow audit's dense pass only

    Out(Row in) {
      docId = in.getAs("doc_id");
      task = in.getAs("task");
      reference = in.getAs("reference");
      source = in.getAs("source");
    }

    Out error(String s, String message) {
      status = s;
      error = message;
      return this;
    }

    /** A too_long row: the engine's words (the tokens and the limit) and what the job adds, {@code more}. */
    void tooLong(PromptTooLongException e, String more) {
      error(JobSchemas.TOO_LONG, e.getMessage() + more);
      inputTokens = e.tokens();
    }

    void ok(GenerationResult r) {
      output = r.text();
      finishReason = r.finishReason().label();
      boolean cut = r.finishReason() == io.longsieve.engine.FinishReason.LENGTH
          || r.finishReason() == io.longsieve.engine.FinishReason.CONTEXT_FULL;
      if (settings != null && settings.jsonSchema() != null && cut) {
        error(JobSchemas.JSON_INCOMPLETE, "the JSON document was cut (" + finishReason + ") before it closed; the output "
            + "holds what was written; raise max_new_tokens");
      }
      stats = r.stats();
      inputTokens = stats.inputTokens();
      backend = stats.backend();
      device = stats.device();
      policyResolved = stats.policyResolved();
      outputTokens = stats.outputTokens();
    }

    /** The RESULT row, each value set by its column's name ({@link ResultRow}), so the order lives in JobSchemas alone. */
    Row row(StructType schema, String runId, String executor, int partition, long t0) {
      ResultRow r = new ResultRow(schema);
      r.set("doc_id", docId).set("run_id", runId).set("task", task).set("status", status).set("error", error)
          .set("notes", notes).set("output", output).set("input_tokens", inputTokens).set("output_tokens", outputTokens)
          .set("finish_reason", finishReason).set("reference", reference).set("source", source)
          .set("backend", backend).set("device", device).set("policy", policy).set("policy_resolved", policyResolved)
          .set("total_ms", (System.nanoTime() - t0) / 1e6).set("executor_id", executor).set("partition_id", partition);
      GenerationStats s = stats;
      if (s != null) {
        PolicyStats p = s.policyStats();
        r.set("ttft_ms", s.ttftMs()).set("prefill_ms", s.prefillMs()).set("decode_ms", s.decodeMs())
            .set("attended_tokens_mean", p.attendedTokensMean())
            .set("selected_fraction_by_layer", floats(p.selectedFractionByLayer()))
            .set("selection_cache_hit_rate", p.selectionCacheHitRate()).set("kv_bytes_before", s.kvBytesBefore())
            .set("kv_bytes_after", p.kvBytesAfter()).set("sparse_layers", p.sparseLayers())
            .set("selection_ms", p.selectionMs()).set("attention_ms", s.attentionMs())
            .set("decode_batch_mean", Double.isNaN(s.decodeBatchMean()) ? null : s.decodeBatchMean())
            .set("prefix_tokens_reused", s.prefixTokensReused());
      }
      if (fidelity != null) {
        r.set("kl_mean", fidelity.klMean()).set("kl_max", fidelity.klMax()).set("top1_agreement", fidelity.top1Agreement());
      }
      Settings g = settings;
      if (g != null) {
        r.set("prompt_source", g.promptSource()).set("max_new_tokens", g.maxNewTokens())
            .set("temperature", g.sampling().temperature()).set("top_p", g.sampling().topP())
            .set("seed", g.sampling().seed()).set("stop", JobSchemas.seq(g.stop()));
      }
      return r.build();
    }

    private static scala.collection.immutable.Seq<Float> floats(float[] a) {
      if (a == null) return null;
      List<Float> l = new ArrayList<>(a.length);
      for (float f : a) l.add(f);
      return JobSchemas.seq(l);
    }
  }
}
