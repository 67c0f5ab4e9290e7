package io.longsieve.job;

import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.policy.PolicySpec;
import java.io.Serializable;
import java.nio.file.Path;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Pattern;

/**
 * Options of one run, in one typed record. They are read from the defaults below, then a properties
 * file ({@code --conf-file}), then {@code spark.longsieve.*} keys (Spark's own configuration under
 * spark-submit, then {@code --conf} flags), then the named CLI flags; the later source wins. A
 * misspelt {@code spark.longsieve.*} key fails at start-up with the list of known keys.
 *
 * @param input        where the documents are: a JSONL or Parquet file or folder (any Hadoop file system)
 * @param output       output root: outputs/, stats/ and runs/ go under it
 * @param model        Hugging Face checkpoint folder, readable from every executor
 * @param master       Spark master URL; local[*] runs in this JVM on all cores
 * @param runId        names this run in the run_id partitions and runs/&lt;runId&gt;.json; [A-Za-z0-9_-]{1,64}
 * @param maxNewTokens most tokens generated per document
 * @param policy       attention policy (from --policy or --prefill/--kv/--decode), parsed once here
 * @param device       auto (CUDA when usable, else CPU), cpu or cuda
 * @param truncate     cut over-long documents to fit the context (head and tail kept) instead of too_long
 * @param threads      CPU threads per engine for matmul; 0 means all cores of the executor
 * @param prefillChunk prompt tokens per prefill chunk
 * @param maxContext   longest prompt + output per document in tokens; 0 means the model's own limit
 * @param partitions   partitions of the generation stage; 0 means Spark's default parallelism
 * @param sparkConf    every other spark.* key, passed to the SparkSession as given
 * @param production   resume, time limits, progress, stage-level GPU scheduling ({@link ProductionOptions})
 * @param ops          resource wait, run budgets, shadow audit ({@link OpsOptions})
 * @param generation   prompt template, system message, raw, sampling ({@link GenerationOptions}); rows may override
 */
public record RunOptions(
    String input,
    String output,
    String model,
    String master,
    String runId,
    int maxNewTokens,
    PolicySpec policy,
    String device,
    boolean truncate,
    int threads,
    int prefillChunk,
    int maxContext,
    int partitions,
    Map<String, String> sparkConf,
    ProductionOptions production,
    OpsOptions ops,
    GenerationOptions generation) implements Serializable {

  /** Characters a run id may use: it becomes a folder name and a partition value. */
  public static final Pattern RUN_ID = Pattern.compile("[A-Za-z0-9_-]{1,64}");

  public static final String PREFIX = "spark.longsieve.";

  /** Every key a run understands, with its default (null: none) and what it means. */
  public enum Key {
    INPUT("input", null, "JSONL or Parquet input file or folder (required)"),
    OUTPUT("output", null, "output root for outputs/, stats/, runs/ (required)"),
    MODEL("model", null, "Hugging Face checkpoint folder (default: <longsieve.home>/models/longsieve-needle-7m)"),
    RUN_ID("runId", null, "run id, [A-Za-z0-9_-]{1,64} (default: UTC time, e.g. 20261129T083000Z)"),
    MAX_NEW_TOKENS("maxNewTokens", "64", "most tokens generated per document (a row's max_new_tokens wins)"),
    PROMPT_TEMPLATE("promptTemplate", null,
        "prompt template for every row without its own prompt: {text}, {documents}, {question}, {column}; {{ }} for braces"),
    PROMPT_TEMPLATE_FILE("promptTemplateFile", null, "a file holding the prompt template (instead of promptTemplate)"),
    SYSTEM("system", null, "system message for the chat template (a row's system wins)"),
    RAW("raw", "false", "true: prompts as they are, no chat template (a row's raw wins)"),
    TEMPERATURE("temperature", "0", "sampling temperature; 0 = greedy (a row's temperature wins)"),
    TOP_P("topP", "1", "nucleus sampling mass in (0, 1] (a row's top_p wins)"),
    SEED("seed", "0", "sampling seed: the same document and seed give the same output (a row's seed wins)"),
    STOP("stop", null, "stop strings: one string, or a JSON array of strings (a row's stop wins)"),
    JSON_SCHEMA("jsonSchema", null,
        "JSON Schema every output follows (constrained decoding, docs/structured-output.md); a row's json_schema wins"),
    JSON_SCHEMA_FILE("jsonSchemaFile", null, "a file holding the JSON schema (instead of jsonSchema)"),
    TYPED_OUTPUT("typedOutput", "false", "with a run-level JSON schema: outputs get an answer column typed from the schema"),
    POLICY("policy", null, "attention policy, e.g. dense (default: dense)"),
    PREFILL("prefill", null, "prefill attention policy slot (instead of policy)"),
    KV("kv", null, "KV compression policy slot (instead of policy)"),
    DECODE("decode", null, "decode attention policy slot (instead of policy)"),
    DEVICE("device", "auto", "auto, cpu or cuda"),
    TRUNCATE("truncate", "false", "keep head and tail of over-long documents instead of too_long"),
    THREADS("threads", "0", "CPU threads per engine; 0 = all cores"),
    PREFILL_CHUNK("prefillChunk", Integer.toString(EngineSpec.DEFAULT_PREFILL_CHUNK),
        "prompt tokens per prefill chunk (a TSA prefill runs in its own tsa:chunk)"),
    MAX_CONTEXT("maxContext", "0", "longest prompt + output in tokens; 0 = the model's limit"),
    PARTITIONS("partitions", "0", "partitions of the generation stage; 0 = task slots x 2, cost-balanced"),
    RESUME("resume", "false", "skip doc_ids that an earlier run under the same output already finished with status ok"),
    RESUME_ANYWAY("resumeAnyway", "false",
        "with resume: run even when an earlier run made its answers with another model, policy, sampling or prompt"),
    DOC_TIMEOUT("docTimeoutSeconds", "0", "per-document time limit in seconds (timeout row); 0 = none"),
    PROGRESS_INTERVAL("progressIntervalSeconds", "30", "seconds between progress log lines on the driver; 0 = none"),
    INFERENCE_GPU_AMOUNT("inferenceGpuAmount", "0",
        "GPU share each generation task claims through stage-level scheduling (e.g. 0.25); 0 = use spark.task.resource.gpu.amount"),
    CHARS_PER_TOKEN("charsPerToken", "4.0", "characters per token for the driver's cost estimate"),
    SLICES("slices", "0", "commit slices of the generation stage (durable progress for --resume); 0 = one per wave of task slots"),
    MAX_BATCH("maxBatch", "8", "documents an executor's engine runs at once, decode steps batched (continuous batching); "
        + "1 runs one at a time on the decode kernels fastest for one sequence"),
    GPU_MEMORY_FRACTION("gpuMemoryFraction", "0.9",
        "share of the GPU memory free when the engine opens that it may take (weights, KV cache, work space); lower it when RAPIDS shares the GPU"),
    PREFIX_REUSE("prefixReuse", "true",
        "rows sharing a long prompt prefix (one document, several questions) run in one partition and its KV cache is "
            + "computed once; false = every row prefills its whole prompt"),
    PREFIX_CACHE_MB("prefixCacheMb", "0",
        "MiB the kept prompt prefixes of one engine may hold (least recently used dropped first); 0 = a quarter of its KV memory"),
    RESOURCE_WAIT("resourceWaitSeconds", "600",
        "seconds a stage may wait while no executor offers what its tasks ask for (e.g. a GPU), then the run fails; 0 = forever"),
    MAX_TOTAL_TOKENS("maxTotalTokens", "0",
        "run budget of input + output tokens; documents past it get budget_exceeded rows (--resume runs them later); 0 = none"),
    MAX_DOCS("maxDocs", "0", "run budget of documents sent to the engine; the rest get budget_exceeded rows; 0 = none"),
    AUDIT_FRACTION("auditFraction", "0",
        "share of documents (sampled by doc_id) also run with dense attention, compared in the audit table; 0 = off"),
    AUDIT_SEED("auditSeed", "0", "seed of the audit sample"),
    REPORT("report", "true", "write the HTML report at the end of the run; false: skip it (longsieve report writes it later)"),
    TEST_INJECT_OOM("test.injectOomDocId", null, "testing: fail this doc_id as if out of GPU memory on every attempt"),
    TEST_INJECT_STICKY("test.injectStickyCudaError", null,
        "testing: DOC_ID@MARKER_FILE, the first attempt of DOC_ID hits a sticky CUDA error (the executor exits with 45)");

    private final String name;
    private final String defaultValue;
    private final String doc;

    Key(String name, String defaultValue, String doc) {
      this.name = name;
      this.defaultValue = defaultValue;
      this.doc = doc;
    }

    /** The full configuration key, e.g. spark.longsieve.maxNewTokens. */
    public String conf() {
      return PREFIX + name;
    }

    public String doc() {
      return doc;
    }

    static Key byConf(String conf) {
      for (Key k : values()) if (k.conf().equals(conf)) return k;
      return null;
    }
  }

  public RunOptions {
    sparkConf = Map.copyOf(sparkConf);
    if (production == null) production = ProductionOptions.DEFAULTS;
    if (ops == null) ops = OpsOptions.DEFAULTS;
    if (generation == null) generation = GenerationOptions.DEFAULTS;
  }

  /**
   * Options from merged settings (later layers already applied over earlier ones). Keys are
   * {@code spark.longsieve.*} ({@link Key}), {@code spark.master}, or any other {@code spark.*} key
   * for the SparkSession.
   *
   * @throws IllegalArgumentException naming the bad key or value: an unknown spark.longsieve.* key
   *     (with the list of known keys), a key outside spark.*, a missing input/output, a bad run id,
   *     number or policy
   */
  public static RunOptions fromSettings(Map<String, String> settings) {
    return fromSettings(settings, true);
  }

  /**
   * Engine and generation settings without a run's files, for callers whose rows come from Spark
   * (the DataFrame API {@link LongSieve}, the SQL functions {@link LongSieveSql}): {@link #input} and
   * {@link #output} are null, and giving either is refused, as is any key that only a file run reads
   * ({@link #FILE_RUN_ONLY}).
   *
   * @throws IllegalArgumentException as {@link #fromSettings} does
   */
  public static RunOptions forEngine(Map<String, String> settings) {
    for (String k : settings.keySet()) {
      Key key = Key.byConf(k.trim());
      if (key != null && FILE_RUN_ONLY.contains(key)) {
        throw new IllegalArgumentException("'" + k.trim() + "' applies to longsieve run over files, not to rows from a "
            + "DataFrame or a query");
      }
    }
    return fromSettings(settings, false);
  }

  /** Keys only a run over files reads: its input, output, resume, budgets, audit, slices, progress. */
  public static final java.util.Set<Key> FILE_RUN_ONLY = java.util.EnumSet.of(Key.INPUT, Key.OUTPUT, Key.RESUME,
      Key.RESUME_ANYWAY, Key.MAX_TOTAL_TOKENS, Key.MAX_DOCS, Key.AUDIT_FRACTION, Key.AUDIT_SEED, Key.SLICES, Key.PROGRESS_INTERVAL,
      Key.RESOURCE_WAIT, Key.REPORT);

  private static RunOptions fromSettings(Map<String, String> settings, boolean files) {
    Map<Key, String> values = new LinkedHashMap<>();
    Map<String, String> spark = new TreeMap<>();
    for (Map.Entry<String, String> e : settings.entrySet()) {
      String k = e.getKey().trim();
      if (k.startsWith(PREFIX)) {
        Key key = Key.byConf(k);
        if (key == null) throw new IllegalArgumentException("unknown option '" + k + "'; known keys:\n" + knownKeys());
        values.put(key, e.getValue() == null ? null : e.getValue().trim());
      } else if (k.startsWith("spark.")) {
        spark.put(k, e.getValue());
      } else {
        throw new IllegalArgumentException("'" + k + "' is neither a spark.longsieve.* option nor a spark.* setting");
      }
    }
    String input = files ? required(values, Key.INPUT, "--input") : null;
    String output = files ? required(values, Key.OUTPUT, "--output") : null;
    String model = value(values, Key.MODEL);
    if (model == null) model = defaultModel().toString();
    String master = spark.remove("spark.master");
    if (master == null || master.isBlank()) master = "local[*]";
    String runId = value(values, Key.RUN_ID);
    if (runId == null) runId = defaultRunId(Instant.now());
    checkRunId(runId);
    PolicySpec policy = PolicySpec.compose(value(values, Key.POLICY), value(values, Key.PREFILL),
        value(values, Key.KV), value(values, Key.DECODE));
    String device = value(values, Key.DEVICE);
    if (!device.equals("auto") && !device.equals("cpu") && !device.equals("cuda")) {
      throw new IllegalArgumentException(Key.DEVICE.conf() + " must be auto, cpu or cuda, not '" + device + "'");
    }
    RunOptions o = new RunOptions(input, output, model, master, runId,
        intAtLeast(values, Key.MAX_NEW_TOKENS, 1), policy, device, bool(values, Key.TRUNCATE),
        intAtLeast(values, Key.THREADS, 0), intAtLeast(values, Key.PREFILL_CHUNK, 1),
        intAtLeast(values, Key.MAX_CONTEXT, 0), intAtLeast(values, Key.PARTITIONS, 0), spark,
        new ProductionOptions(bool(values, Key.RESUME), bool(values, Key.RESUME_ANYWAY),
            intAtLeast(values, Key.DOC_TIMEOUT, 0),
            intAtLeast(values, Key.PROGRESS_INTERVAL, 0), fraction(values, Key.INFERENCE_GPU_AMOUNT),
            positive(values, Key.CHARS_PER_TOKEN), intAtLeast(values, Key.SLICES, 0), intAtLeast(values, Key.MAX_BATCH, 1),
            nonZeroShare(values, Key.GPU_MEMORY_FRACTION), bool(values, Key.PREFIX_REUSE),
            intAtLeast(values, Key.PREFIX_CACHE_MB, 0), value(values, Key.TEST_INJECT_OOM),
            value(values, Key.TEST_INJECT_STICKY)),
        new OpsOptions(intAtLeast(values, Key.RESOURCE_WAIT, 0), longAtLeast(values, Key.MAX_TOTAL_TOKENS, 0),
            longAtLeast(values, Key.MAX_DOCS, 0), share(values, Key.AUDIT_FRACTION), longAtLeast(values, Key.AUDIT_SEED, 0),
            bool(values, Key.REPORT)),
        GenerationOptions.from(values));
    o.engineSpec(); // EngineSpec validates its own fields; fail here, on the driver, not on an executor
    return o;
  }

  /**
   * The spec each executor opens its engine from. Every request names the run's policy, so the
   * engine's default stays dense: runs that differ only in policy share one engine per JVM.
   */
  public EngineSpec engineSpec() {
    return new EngineSpec(model, device, -1, threads, prefillChunk, maxContext, production.gpuMemoryFraction(), PolicySpec.DENSE)
        .withMaxBatch(production.maxBatch()).withPrefixCacheBytes(production.prefixCacheBytes());
  }

  /**
   * Hadoop settings for the checks made before Spark starts: the defaults (core-site.xml on the
   * class path) and every spark.hadoop.* key, which Spark would copy in the same way.
   */
  public org.apache.hadoop.conf.Configuration hadoopConfiguration() {
    org.apache.hadoop.conf.Configuration conf = new org.apache.hadoop.conf.Configuration();
    for (Map.Entry<String, String> e : sparkConf.entrySet()) {
      if (e.getKey().startsWith("spark.hadoop.")) conf.set(e.getKey().substring("spark.hadoop.".length()), e.getValue());
    }
    return conf;
  }

  /** These options as settings (spark.longsieve.* keys and spark.master), for the run manifest. */
  public Map<String, String> asSettings() {
    Map<String, String> m = new LinkedHashMap<>();
    m.put(Key.INPUT.conf(), input);
    m.put(Key.OUTPUT.conf(), output);
    m.put(Key.MODEL.conf(), model);
    m.put("spark.master", master);
    m.put(Key.RUN_ID.conf(), runId);
    m.put(Key.MAX_NEW_TOKENS.conf(), Integer.toString(maxNewTokens));
    m.put(Key.POLICY.conf(), policy.canonical());
    m.put(Key.DEVICE.conf(), device);
    m.put(Key.TRUNCATE.conf(), Boolean.toString(truncate));
    m.put(Key.THREADS.conf(), Integer.toString(threads));
    m.put(Key.PREFILL_CHUNK.conf(), Integer.toString(prefillChunk));
    m.put(Key.MAX_CONTEXT.conf(), Integer.toString(maxContext));
    m.put(Key.PARTITIONS.conf(), Integer.toString(partitions));
    m.put(Key.RESUME.conf(), Boolean.toString(production.resume()));
    m.put(Key.RESUME_ANYWAY.conf(), Boolean.toString(production.resumeAnyway()));
    m.put(Key.DOC_TIMEOUT.conf(), Integer.toString(production.docTimeoutSeconds()));
    m.put(Key.PROGRESS_INTERVAL.conf(), Integer.toString(production.progressIntervalSeconds()));
    m.put(Key.INFERENCE_GPU_AMOUNT.conf(), Double.toString(production.inferenceGpuAmount()));
    m.put(Key.CHARS_PER_TOKEN.conf(), Double.toString(production.charsPerToken()));
    m.put(Key.SLICES.conf(), Integer.toString(production.slices()));
    m.put(Key.MAX_BATCH.conf(), Integer.toString(production.maxBatch()));
    m.put(Key.GPU_MEMORY_FRACTION.conf(), Double.toString(production.gpuMemoryFraction()));
    m.put(Key.PREFIX_REUSE.conf(), Boolean.toString(production.prefixReuse()));
    m.put(Key.PREFIX_CACHE_MB.conf(), Integer.toString(production.prefixCacheMb()));
    m.put(Key.RESOURCE_WAIT.conf(), Integer.toString(ops.resourceWaitSeconds()));
    m.put(Key.MAX_TOTAL_TOKENS.conf(), Long.toString(ops.maxTotalTokens()));
    m.put(Key.MAX_DOCS.conf(), Long.toString(ops.maxDocs()));
    m.put(Key.AUDIT_FRACTION.conf(), Double.toString(ops.auditFraction()));
    m.put(Key.AUDIT_SEED.conf(), Long.toString(ops.auditSeed()));
    m.put(Key.REPORT.conf(), Boolean.toString(ops.report()));
    if (generation.promptTemplate() != null) m.put(Key.PROMPT_TEMPLATE.conf(), generation.promptTemplate().source());
    if (generation.system() != null) m.put(Key.SYSTEM.conf(), generation.system());
    m.put(Key.RAW.conf(), Boolean.toString(generation.raw()));
    m.put(Key.TEMPERATURE.conf(), Double.toString(generation.temperature()));
    m.put(Key.TOP_P.conf(), Double.toString(generation.topP()));
    m.put(Key.SEED.conf(), Long.toString(generation.seed()));
    if (!generation.stop().isEmpty()) m.put(Key.STOP.conf(), GenerationOptions.formatStop(generation.stop()));
    if (generation.jsonSchema() != null) m.put(Key.JSON_SCHEMA.conf(), generation.jsonSchema().canonical());
    m.put(Key.TYPED_OUTPUT.conf(), Boolean.toString(generation.typedOutput()));
    if (production.injectOomDocId() != null) m.put(Key.TEST_INJECT_OOM.conf(), production.injectOomDocId());
    if (production.injectStickyCudaError() != null) {
      m.put(Key.TEST_INJECT_STICKY.conf(), production.injectStickyCudaError());
    }
    return m;
  }

  /** @throws IllegalArgumentException when the id is outside [A-Za-z0-9_-]{1,64} */
  public static void checkRunId(String runId) {
    if (runId == null || !RUN_ID.matcher(runId).matches()) {
      throw new IllegalArgumentException("run id '" + runId + "' is not allowed: use 1 to 64 of A-Z a-z 0-9 _ -"
          + " (it becomes a folder name and a partition value)");
    }
  }

  /** The default run id: the UTC start time to the second, e.g. 20261129T083000Z. */
  public static String defaultRunId(Instant now) {
    return DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmss'Z'").withZone(ZoneOffset.UTC).format(now);
  }

  /**
   * The bundled model, trained by the project to find facts in long documents:
   * {@code <longsieve.home>/models/longsieve-needle-7m}, longsieve.home set by bin/longsieve.
   */
  public static Path defaultModel() {
    String home = System.getProperty("longsieve.home");
    Path root = home == null || home.isBlank() ? Path.of("").toAbsolutePath() : Path.of(home);
    return root.resolve("models").resolve("longsieve-needle-7m");
  }

  /** One line per key: name, default, meaning (the test-only spark.longsieve.test.* keys are not listed). */
  public static String knownKeys() {
    StringBuilder sb = new StringBuilder();
    for (Key k : Key.values()) {
      if (k.name.startsWith("test.")) continue;
      sb.append("  ").append(k.conf());
      if (k.defaultValue != null) sb.append(" (default ").append(k.defaultValue).append(')');
      sb.append(": ").append(k.doc).append('\n');
    }
    return sb.toString();
  }

  static String value(Map<Key, String> values, Key k) {
    String v = values.get(k);
    return v == null || v.isEmpty() ? k.defaultValue : v;
  }

  private static String required(Map<Key, String> values, Key k, String flag) {
    String v = value(values, k);
    if (v == null) throw new IllegalArgumentException("missing " + flag + " (or " + k.conf() + ")");
    return v;
  }

  static int intAtLeast(Map<Key, String> values, Key k, int min) {
    String v = value(values, k);
    int n;
    try {
      n = Integer.parseInt(v);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(k.conf() + " must be an integer, not '" + v + "'");
    }
    if (n < min) throw new IllegalArgumentException(k.conf() + " must be >= " + min + ", not " + n);
    return n;
  }

  static long longAtLeast(Map<Key, String> values, Key k, long min) {
    String v = value(values, k);
    long n;
    try {
      n = Long.parseLong(v);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(k.conf() + " must be an integer, not '" + v + "'");
    }
    if (n < min) throw new IllegalArgumentException(k.conf() + " must be >= " + min + ", not " + n);
    return n;
  }

  /** A share in [0, 1]. */
  private static double share(Map<Key, String> values, Key k) {
    double d = number(values, k);
    if (!(d >= 0 && d <= 1)) throw new IllegalArgumentException(k.conf() + " must be between 0 and 1, not " + d);
    return d;
  }

  /** A GPU share for stage-level scheduling: 0 (off), a fraction up to 0.5, or a whole number. */
  private static double fraction(Map<Key, String> values, Key k) {
    double d = number(values, k);
    if (d < 0 || (d > 0.5 && d != Math.rint(d))) {
      throw new IllegalArgumentException(k.conf() + " must be 0, a fraction <= 0.5 or a whole number (Spark's rule), not " + d);
    }
    return d;
  }

  private static double nonZeroShare(Map<Key, String> values, Key k) {
    double d = number(values, k);
    if (!(d > 0 && d <= 1)) throw new IllegalArgumentException(k.conf() + " must be in (0, 1], not " + d);
    return d;
  }

  private static double positive(Map<Key, String> values, Key k) {
    double d = number(values, k);
    if (!(d > 0)) throw new IllegalArgumentException(k.conf() + " must be > 0, not " + d);
    return d;
  }

  static double number(Map<Key, String> values, Key k) {
    String v = value(values, k);
    try {
      return Double.parseDouble(v);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(k.conf() + " must be a number, not '" + v + "'");
    }
  }

  static boolean bool(Map<Key, String> values, Key k) {
    String v = value(values, k).toLowerCase(java.util.Locale.ROOT);
    if (v.equals("true")) return true;
    if (v.equals("false")) return false;
    throw new IllegalArgumentException(k.conf() + " must be true or false, not '" + v + "'");
  }
}
