package io.longsieve.job;

import io.longsieve.policy.PolicySpec;
import io.longsieve.engine.Engine;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.SamplingParams;
import io.longsieve.engine.GenerationRequest;
import io.longsieve.engine.GenerationResult;
import io.longsieve.engine.GenerationStats;
import io.longsieve.engine.PromptTooLongException;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * The model as SQL functions, for pipelines that already hold their text in Spark:
 * <pre>
 *   LongSieveSql.register(spark);
 *   spark.sql("SELECT doc_id, longsieve_generate(text) AS summary FROM docs");
 *   spark.sql("SELECT doc_id, longsieve_generate_with(text, map('max_new_tokens', '32')) FROM docs");
 *   spark.sql("SELECT doc_id, r.output, r.status, r.total_ms FROM (SELECT doc_id, longsieve_result(text, map()) AS r FROM docs)");
 * </pre>
 * {@code longsieve_generate(prompt)} and {@code longsieve_generate_with(prompt, options)} return the
 * answer (a string); {@code longsieve_result(prompt, options)} returns a struct of the answer, its
 * status and error, the document's stats and the settings it was generated with ({@link #RESULT}). The prompt is the user message; the
 * model's chat template is applied unless the option {@code raw} is {@code true}. (Spark's Java UDFs
 * take a fixed number of arguments, hence two names for the answer with and without options.)
 *
 * <p>Failure semantics first: a call never fails the query. A null or empty prompt, an unknown option
 * or a bad value gives {@code bad_input}, a prompt over the model's context {@code too_long}, out of
 * memory after the job's smaller-chunk retries {@code oom}, anything else from the engine
 * {@code engine_error}: the answer functions then return null and the struct carries the status and
 * message. A sticky CUDA error ends the executor (exit 45) as in the CLI job, and Spark retries the
 * task on a new one. Calls are deterministic (greedy, or sampled with a seed: options temperature,
 * top_p, seed, stop), so a retried task gives the same answers. The option {@code json_schema} (a JSON
 * Schema's text) holds the answer to that schema (docs/structured-output.md); a schema outside the
 * supported subset is {@code bad_input} naming the keyword, and an answer cut by max_new_tokens before
 * its document closed is {@code json_incomplete}, the cut text in {@code output}.
 *
 * <p>Engine settings come from the session's {@code spark.longsieve.*} options at registration, the
 * same keys as {@code longsieve run} ({@link RunOptions}; input and output do not apply): model,
 * device, policy, maxNewTokens, prefillChunk, maxContext, maxBatch, gpuMemoryFraction,
 * docTimeoutSeconds. Each executor opens one engine for them ({@link ExecutorEngine}); calls from its
 * concurrent tasks share it and are batched by it, bound to the task's GPU as in the job.
 */
public final class LongSieveSql {
  private LongSieveSql() {}

  /** Per-call options (the map argument); every other key is refused as bad_input. */
  public static final List<String> OPTIONS = List.of("max_new_tokens", "policy", "system", "raw", "temperature", "top_p",
      "seed", "stop", "json_schema");

  /**
   * The struct {@code longsieve_result} returns: the answer, status and error, the stats, and the settings the
   * call used (a call's option over the session's, greedy by default) under the stats table's column names.
   */
  public static final StructType RESULT = new StructType()
      .add("output", DataTypes.StringType)
      .add("status", DataTypes.StringType, false)
      .add("error", DataTypes.StringType)
      .add("input_tokens", DataTypes.IntegerType)
      .add("output_tokens", DataTypes.IntegerType)
      .add("finish_reason", DataTypes.StringType)
      .add("ttft_ms", DataTypes.DoubleType)
      .add("total_ms", DataTypes.DoubleType)
      .add("backend", DataTypes.StringType)
      .add("device", DataTypes.StringType)
      .add("policy", DataTypes.StringType)
      // what the call was generated with, its option over the session's (names and types of the stats table's columns);
      // null on a bad_input row, whose options were not read
      .add("policy_resolved", DataTypes.StringType) // null where the engine did not run
      .add("max_new_tokens", DataTypes.IntegerType)
      .add("temperature", DataTypes.DoubleType)     // 0: greedy
      .add("top_p", DataTypes.DoubleType)
      .add("seed", DataTypes.LongType)
      .add("stop", DataTypes.createArrayType(DataTypes.StringType, false));

  /**
   * Registers the three functions on {@code spark} with its current {@code spark.longsieve.*} settings.
   *
   * @throws IllegalArgumentException a bad or unknown spark.longsieve.* setting, named (as {@code run} refuses it)
   */
  public static void register(SparkSession spark) {
    Map<String, String> settings = new LinkedHashMap<>();
    scala.jdk.javaapi.CollectionConverters.asJava(spark.conf().getAll()).forEach((k, v) -> {
      // the session may carry a file run's keys too (spark-defaults.conf sets resourceWaitSeconds): not ours to read
      RunOptions.Key key = RunOptions.Key.byConf(k);
      if (k.startsWith(RunOptions.PREFIX) && (key == null || !RunOptions.FILE_RUN_ONLY.contains(key))) settings.put(k, v);
    });
    RunOptions o = RunOptions.forEngine(settings);
    Calls calls = new Calls(o.engineSpec(), o.policy(), o.maxNewTokens(),
        new DocumentAttempts(o.production().docTimeoutSeconds(), o.prefillChunk(), null), o.generation());
    spark.udf().register("longsieve_generate",
        (UDF1<String, String>) prompt -> calls.call(prompt, Map.of()).getString(0), DataTypes.StringType);
    spark.udf().register("longsieve_generate_with",
        (UDF2<String, scala.collection.Map<String, String>, String>) (prompt, opts) -> calls.call(prompt, javaMap(opts))
            .getString(0), DataTypes.StringType);
    spark.udf().register("longsieve_result",
        (UDF2<String, scala.collection.Map<String, String>, Row>) (prompt, opts) -> calls.call(prompt, javaMap(opts)),
        RESULT);
  }

  private static Map<String, String> javaMap(scala.collection.Map<String, String> m) {
    return m == null ? Map.of() : scala.jdk.javaapi.CollectionConverters.asJava(m);
  }

  /** What the functions run on the executors: serializable, holding only the settings. */
  static final class Calls implements Serializable {
    private final EngineSpec spec;
    private final PolicySpec policy;    // the session's policy, unless a call names its own
    private final int maxNewTokens;
    private final DocumentAttempts attempts;
    private final GenerationOptions generation; // the session's system, raw and sampling, unless a call sets its own

    Calls(EngineSpec spec, PolicySpec policy, int maxNewTokens, DocumentAttempts attempts) {
      this(spec, policy, maxNewTokens, attempts, GenerationOptions.DEFAULTS);
    }

    Calls(EngineSpec spec, PolicySpec policy, int maxNewTokens, DocumentAttempts attempts, GenerationOptions generation) {
      this.generation = generation;
      this.spec = spec;
      this.policy = policy;
      this.maxNewTokens = maxNewTokens;
      this.attempts = attempts;
    }

    /** One prompt to a {@link #RESULT} row; never throws for a bad prompt or a failed generation. */
    Row call(String prompt, Map<String, String> options) {
      if (prompt == null || prompt.isBlank()) return failed(JobSchemas.BAD_INPUT, "the prompt is null or empty", null, null);
      GenerationRequest request;
      try {
        request = request(prompt, options);
      } catch (IllegalArgumentException e) {
        return failed(JobSchemas.BAD_INPUT, e.getMessage(), null, null);
      }
      Engine engine = ExecutorEngine.get(spec);
      try {
        GenerationResult r = attempts.run(request.id(), () -> engine.generate(request));
        GenerationStats s = r.stats();
        boolean cut = r.finishReason() == io.longsieve.engine.FinishReason.LENGTH
            || r.finishReason() == io.longsieve.engine.FinishReason.CONTEXT_FULL;
        if (request.jsonSchema() != null && cut) { // the text so far, and a status that says it is not a whole document
          return row(r.text(), JobSchemas.JSON_INCOMPLETE, "the JSON document was cut (" + r.finishReason().label()
              + ") before it closed; raise max_new_tokens", s.inputTokens(), s.outputTokens(), r.finishReason().label(),
              s.ttftMs(), s.totalMs(), s.backend(), s.device(), s.policy(), s.policyResolved(), request);
        }
        return row(r.text(), JobSchemas.OK, null, s.inputTokens(), s.outputTokens(), r.finishReason().label(), s.ttftMs(),
            s.totalMs(), s.backend(), s.device(), s.policy(), s.policyResolved(), request);
      } catch (DocumentAttempts.Failed e) {
        return failed(e.status(), e.getMessage(), null, request);
      } catch (PromptTooLongException e) {
        return failed(JobSchemas.TOO_LONG, e.getMessage(), e.tokens(), request);
      } catch (RuntimeException e) {
        return failed(JobSchemas.ENGINE_ERROR, e.getClass().getSimpleName() + ": " + e.getMessage(), null, request);
      }
    }

    private GenerationRequest request(String prompt, Map<String, String> options) {
      for (String k : options.keySet()) {
        if (!OPTIONS.contains(k)) throw new IllegalArgumentException("unknown option '" + k + "'; known: " + OPTIONS);
      }
      int n = maxNewTokens;
      String value = options.get("max_new_tokens");
      if (value != null) {
        try {
          n = Integer.parseInt(value.trim());
        } catch (NumberFormatException e) {
          throw new IllegalArgumentException("max_new_tokens must be an integer, not '" + value + "'");
        }
        if (n < 1) throw new IllegalArgumentException("max_new_tokens must be >= 1, not " + n);
      }
      PolicySpec p = options.containsKey("policy") ? PolicySpec.parse(options.get("policy")) : policy;
      String raw = options.getOrDefault("raw", Boolean.toString(generation.raw())).trim();
      if (!raw.equals("true") && !raw.equals("false")) throw new IllegalArgumentException("raw must be true or false, not '" + raw + "'");
      SamplingParams sampling = new SamplingParams(number(options, "temperature", generation.temperature()),
          number(options, "top_p", generation.topP()), options.containsKey("seed") ? seed(options.get("seed")) : generation.seed());
      List<String> stop = options.containsKey("stop") ? GenerationOptions.parseStop("stop", options.get("stop")) : generation.stop();
      // an id from the content, so a retried task's call is the same request
      String id = "sql-" + UUID.nameUUIDFromBytes(prompt.getBytes(StandardCharsets.UTF_8));
      GenerationRequest r = raw.equals("true") ? GenerationRequest.raw(id, prompt, n) : GenerationRequest.chat(id, prompt, n);
      String system = options.getOrDefault("system", generation.system());
      if (system != null) r = r.withSystem(system);
      io.longsieve.structured.OutputSchema schema = generation.jsonSchema();
      if (options.containsKey("json_schema")) {
        try {
          schema = io.longsieve.structured.OutputSchema.parse(options.get("json_schema"));
        } catch (io.longsieve.structured.SchemaException e) {
          throw new IllegalArgumentException("json_schema: " + e.getMessage());
        }
      }
      return r.withSampling(sampling).withStopStrings(stop).withPolicy(p).withJsonSchema(schema);
    }

    /** A number option; SamplingParams then checks its range (temperature >= 0, top_p in (0, 1]). */
    private static double number(Map<String, String> options, String key, double dflt) {
      String v = options.get(key);
      if (v == null) return dflt;
      try {
        return Double.parseDouble(v.trim());
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(key + " must be a number, not '" + v + "'");
      }
    }

    private static long seed(String v) {
      try {
        return Long.parseLong(v.trim());
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException("seed must be an integer, not '" + v + "'");
      }
    }

    /** A failed call's row: the request's settings where it was built (null: bad_input), no answer or stats. */
    private static Row failed(String status, String message, Integer inputTokens, GenerationRequest request) {
      String policy = request == null || request.policy() == null ? null : request.policy().canonical();
      return row(null, status, message, inputTokens, null, null, null, null, null, null, policy, null, request);
    }

    /** A {@link #RESULT} row; the settings columns from {@code request}, all null without one. */
    private static Row row(String output, String status, String error, Integer inputTokens, Integer outputTokens,
        String finishReason, Double ttftMs, Double totalMs, String backend, String device, String policy,
        String policyResolved, GenerationRequest request) {
      if (request == null) {
        return RowFactory.create(output, status, error, inputTokens, outputTokens, finishReason, ttftMs, totalMs, backend,
            device, policy, policyResolved, null, null, null, null, null);
      }
      SamplingParams s = request.sampling();
      return RowFactory.create(output, status, error, inputTokens, outputTokens, finishReason, ttftMs, totalMs, backend,
          device, policy, policyResolved, request.maxNewTokens(), s.temperature(), s.topP(), s.seed(),
          JobSchemas.seq(request.stopStrings()));
    }
  }
}
