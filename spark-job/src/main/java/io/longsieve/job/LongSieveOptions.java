package io.longsieve.job;

import io.longsieve.policy.PolicySpec;
import java.io.Serializable;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Options of {@link LongSieve#generate}: the engine and generation settings of {@code longsieve run}
 * without its files. Built fluently ({@link #builder()}) or from a map of strings ({@link #fromMap}),
 * which is what a py4j or Scala caller passes; both check every value as {@code run} does, and an
 * unknown key, or one that only a run over files reads (input, output, resume, budgets, audit), is
 * refused naming it.
 *
 * @param model        Hugging Face checkpoint folder or Hadoop URI, readable from every executor
 * @param device       auto, cpu or cuda
 * @param policy       attention policy, parsed
 * @param maxNewTokens most tokens per document unless a row's max_new_tokens says otherwise
 * @param truncate     keep head and tail of over-long documents instead of too_long rows
 * @param threads      CPU threads per engine; 0 = all cores
 * @param prefillChunk prompt tokens per prefill chunk
 * @param maxContext   longest prompt + output; 0 = the model's limit
 * @param partitions   partitions of the generation stage; 0 = task slots x 2, cost-balanced
 * @param runId        the run_id column's value
 * @param production   per-document time limit, GPU share per task, batching, GPU memory share
 * @param generation   prompt template, system message, raw, sampling
 */
public record LongSieveOptions(String model, String device, PolicySpec policy, int maxNewTokens, boolean truncate,
    int threads, int prefillChunk, int maxContext, int partitions, String runId, ProductionOptions production,
    GenerationOptions generation) implements Serializable {

  /**
   * Options from keys and values: a key is an option's name as in {@code longsieve run --help}
   * without the prefix ({@code maxNewTokens}, {@code temperature}, {@code promptTemplate}) or with it
   * ({@code spark.longsieve.maxNewTokens}).
   *
   * @throws IllegalArgumentException an unknown key (with the known ones), a key for runs over files,
   *     a Spark setting (those belong to the session), or a bad value, named
   */
  public static LongSieveOptions fromMap(Map<String, String> options) {
    Map<String, String> settings = new LinkedHashMap<>();
    for (Map.Entry<String, String> e : options.entrySet()) {
      String k = e.getKey().trim();
      if (k.startsWith("spark.") && !k.startsWith(RunOptions.PREFIX)) {
        throw new IllegalArgumentException("'" + k + "' is a Spark setting: set it on the SparkSession, not in LongSieveOptions");
      }
      settings.put(k.startsWith(RunOptions.PREFIX) ? k : RunOptions.PREFIX + k, e.getValue());
    }
    return of(RunOptions.forEngine(settings));
  }

  /** The engine and generation part of run options. */
  static LongSieveOptions of(RunOptions o) {
    return new LongSieveOptions(o.model(), o.device(), o.policy(), o.maxNewTokens(), o.truncate(), o.threads(),
        o.prefillChunk(), o.maxContext(), o.partitions(), o.runId(), o.production(), o.generation());
  }

  /** Run options without files, for the job's own classes; {@code master} is the session's. */
  RunOptions runOptions(String master) {
    return new RunOptions(null, null, model, master, runId, maxNewTokens, policy, device, truncate, threads, prefillChunk,
        maxContext, partitions, Map.of(), production, OpsOptions.DEFAULTS, generation);
  }

  public static Builder builder() {
    return new Builder();
  }

  /** Collects settings as strings and checks them all in {@link #build()}, as {@link #fromMap} does. */
  public static final class Builder {
    private final Map<String, String> m = new LinkedHashMap<>();

    /** Any option by name, as in {@link #fromMap}. */
    public Builder set(String key, String value) {
      m.put(key, value);
      return this;
    }

    public Builder model(String dirOrUri) {
      return set("model", dirOrUri);
    }

    public Builder device(String device) {
      return set("device", device);
    }

    public Builder policy(String policy) {
      return set("policy", policy);
    }

    public Builder maxNewTokens(int n) {
      return set("maxNewTokens", Integer.toString(n));
    }

    public Builder truncate(boolean on) {
      return set("truncate", Boolean.toString(on));
    }

    public Builder threads(int n) {
      return set("threads", Integer.toString(n));
    }

    public Builder maxContext(int n) {
      return set("maxContext", Integer.toString(n));
    }

    public Builder partitions(int n) {
      return set("partitions", Integer.toString(n));
    }

    public Builder maxBatch(int n) {
      return set("maxBatch", Integer.toString(n));
    }

    public Builder runId(String id) {
      return set("runId", id);
    }

    /** The template text itself ({@link PromptTemplate}); rows with their own prompt keep theirs. */
    public Builder promptTemplate(String template) {
      return set("promptTemplate", template);
    }

    public Builder system(String system) {
      return set("system", system);
    }

    public Builder raw(boolean raw) {
      return set("raw", Boolean.toString(raw));
    }

    public Builder temperature(double t) {
      return set("temperature", Double.toString(t));
    }

    public Builder topP(double p) {
      return set("topP", Double.toString(p));
    }

    public Builder seed(long seed) {
      return set("seed", Long.toString(seed));
    }

    /** A JSON Schema every output follows (its text; docs/structured-output.md); rows with their own json_schema keep theirs. */
    public Builder jsonSchema(String schema) {
      return set("jsonSchema", schema);
    }

    /** With {@link #jsonSchema}: the result gets an {@code answer} column typed from the schema. */
    public Builder typedOutput(boolean on) {
      return set("typedOutput", Boolean.toString(on));
    }

    public Builder stop(String... stop) {
      return set("stop", GenerationOptions.formatStop(List.of(stop)));
    }

    public LongSieveOptions build() {
      return fromMap(m);
    }
  }
}
