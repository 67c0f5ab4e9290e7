package io.longsieve.job;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Callable;
import org.apache.spark.SparkConf;
import org.apache.spark.sql.SparkSession;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import scala.Tuple2;

/**
 * {@code longsieve run}: the batch job. Options come from defaults, then --conf-file, then
 * spark.longsieve.* in Spark's configuration (spark-submit) and --conf, then the named flags.
 */
@Command(name = "run", mixinStandardHelpOptions = true, sortOptions = false,
    description = "Run a model over a JSONL or Parquet file of documents; write outputs, stats and a manifest.")
public final class RunCommand implements Callable<Integer> {

  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(RunCommand.class);
  /** A failure's stack trace: to the log file only under bin/longsieve (stderr has the failure's one line). */
  static final org.slf4j.Logger FAILURES = org.slf4j.LoggerFactory.getLogger("io.longsieve.failures");

  /** Exit code for a refused configuration (picocli uses 2 for usage errors too). */
  public static final int CONFIG_ERROR = 2;

  @Spec
  CommandSpec spec;

  @Option(names = "--input", paramLabel = "PATH", description = "JSONL or Parquet file or folder.")
  String input;

  @Option(names = "--output", paramLabel = "DIR", description = "Output root (outputs/, stats/, runs/).")
  String output;

  @Option(names = "--model", paramLabel = "DIR", description = "Hugging Face checkpoint folder, or a Hadoop URI (hdfs:, s3a:, file:) that each executor copies to local disk once (default: the bundled models/longsieve-needle-7m).")
  String model;

  @Option(names = "--master", paramLabel = "URL", description = "Spark master (default: local[*]).")
  String master;

  @Option(names = "--run-id", paramLabel = "ID", description = "Run id, [A-Za-z0-9_-]{1,64} (default: UTC time).")
  String runId;

  @Option(names = "--max-new-tokens", paramLabel = "N", description = "Most tokens generated per document (default: 64).")
  Integer maxNewTokens;

  @Option(names = "--prompt-template", paramLabel = "FILE", description = "Prompt template for rows without their own prompt: {text}, {documents}, {question}, {any_column}; {{ and }} for braces (default: the task's preset).")
  Path promptTemplate;

  @Option(names = "--json-schema", paramLabel = "FILE", description = "A JSON Schema every output follows (constrained decoding; docs/structured-output.md says which keywords); a row's json_schema wins.")
  String jsonSchema;

  @Option(names = "--typed-output", description = "With --json-schema: outputs get an 'answer' column whose Spark type comes from the schema.")
  Boolean typedOutput;

  @Option(names = "--system", paramLabel = "TEXT", description = "System message for the chat template (a row's system wins).")
  String system;

  @Option(names = "--raw", description = "Prompts go to the model as they are, without the chat template (a row's raw wins).")
  Boolean raw;

  @Option(names = "--temperature", paramLabel = "T", description = "Sampling temperature; 0 is greedy (default: 0; a row's temperature wins).")
  Double temperature;

  @Option(names = "--top-p", paramLabel = "P", description = "Nucleus sampling mass in (0, 1] (default: 1; a row's top_p wins).")
  Double topP;

  @Option(names = "--seed", paramLabel = "N", description = "Sampling seed: the same document and seed give the same output (default: 0; a row's seed wins).")
  Long seed;

  @Option(names = "--stop", paramLabel = "S", description = "A stop string, not included in the output (repeatable; a row's stop wins).")
  List<String> stop;

  @Option(names = "--policy", paramLabel = "P", description = "Attention policy (default: dense).")
  String policy;

  @Option(names = "--prefill", paramLabel = "P", description = "Prefill attention policy (instead of --policy).")
  String prefill;

  @Option(names = "--kv", paramLabel = "P", description = "KV compression policy (instead of --policy).")
  String kv;

  @Option(names = "--decode", paramLabel = "P", description = "Decode attention policy (instead of --policy).")
  String decode;

  @Option(names = "--device", paramLabel = "D", description = "auto, cpu or cuda (default: auto).")
  String device;

  @Option(names = "--truncate", description = "Keep the head and tail of documents over the context instead of too_long.")
  Boolean truncate;

  @Option(names = "--prefix-reuse", negatable = true, description = "Rows sharing a long prompt prefix (one document, several questions) run in one partition and the prefix's KV cache is computed once (default: on; --no-prefix-reuse turns it off).")
  Boolean prefixReuse;

  @Option(names = "--resume", description = "Skip doc_ids that an earlier run under the same --output finished with status ok.")
  Boolean resume;

  @Option(names = "--resume-anyway", description = "--resume even when an earlier run made its answers with another model, policy, sampling or prompt (the merged results mix them).")
  Boolean resumeAnyway;

  @Option(names = "--max-total-tokens", paramLabel = "N", description = "Run budget of input + output tokens; documents past it get budget_exceeded rows (default: none).")
  Long maxTotalTokens;

  @Option(names = "--max-docs", paramLabel = "N", description = "Run budget of documents; the rest get budget_exceeded rows (default: none).")
  Long maxDocs;

  @Option(names = "--audit-fraction", paramLabel = "F", description = "Share of documents also run with dense attention and compared in the audit table (default: 0).")
  Double auditFraction;

  @Option(names = "--conf", paramLabel = "KEY=VALUE", description = "A spark.longsieve.* option or any Spark setting (repeatable).")
  List<String> conf;

  @Option(names = "--conf-file", paramLabel = "FILE", description = "Properties file of spark.longsieve.* options and Spark settings.")
  Path confFile;

  @Option(names = "--debug", description = "Print the stack trace of an error, not only its one line.")
  boolean debug;

  /**
   * Checks everything it can before Spark starts ({@link LongSieveJob#check}), then runs. Every way it
   * ends is one line on stderr and an exit code (docs/failures.md): 2 for a user error found before
   * Spark starts (bad option, input, model, policy; output not writable or in use); 3 to 7 for a run
   * stopped by something outside the job ({@link RunFault}: the input changed, no disk space, the output
   * removed, Spark gave up after its retries, rows missing at the end), each with the way on; 143 / 130
   * for SIGTERM / SIGINT ({@link RunInterruption}); 1 for anything unexpected. The stack trace goes to
   * the log (the {@code io.longsieve.failures} logger; at DEBUG for a refusal), and to stderr with --debug.
   */
  @Override
  public Integer call() {
    PrintWriter err = spec.commandLine().getErr();
    RunOptions options;
    LongSieveJob.Checked checked;
    try {
      options = RunOptions.fromSettings(settings());
      checked = LongSieveJob.check(options, options.hadoopConfiguration());
    } catch (IllegalArgumentException e) {
      return fail(err, e, CONFIG_ERROR);
    } catch (Exception | Error e) {
      return fail(err, e, 1);
    }
    try (checked; RunInterruption stop = RunInterruption.watch(options.runId(), err)) {
      try {
        return run(options, checked, stop);
      } catch (IllegalArgumentException e) {
        return stop.stopped() ? stop.exitCode() : fail(err, e, CONFIG_ERROR);
      } catch (RunFault e) {
        if (stop.stopped()) return stop.exitCode();
        err.println("longsieve run stopped: " + e.line() + traceHint());
        FAILURES.error("longsieve run stopped: {}", e.getMessage(), e);
        if (debug) e.printStackTrace(err);
        err.flush();
        return e.kind().exitCode();
      } catch (Exception | Error e) {
        return stop.stopped() ? stop.exitCode() : fail(err, e, 1);
      }
    }
  }

  private int run(RunOptions options, LongSieveJob.Checked checked, RunInterruption stop) {
    boolean ownSession = SparkSession.getActiveSession().isEmpty() && SparkSession.getDefaultSession().isEmpty();
    SparkSession spark = session(options);
    try {
      RunSummary s = LongSieveJob.run(spark, options, checked);
      spec.commandLine().getOut().println(s.line());
      return 0;
    } finally {
      if (ownSession && !stop.stopped()) spark.stop(); // on a signal Spark's own hook stops it
    }
  }

  /** Where the stack trace is: the log file bin/longsieve's logging writes, or the log. */
  private String traceHint() {
    if (debug) return "";
    String file = System.getProperty(JobCli.LOG_FILE_PROPERTY);
    return " (stack trace in " + (file != null ? file : "the log") + "; --debug prints it here)";
  }

  private int fail(PrintWriter err, Throwable e, int code) {
    String message = String.valueOf(e.getMessage()).lines().findFirst().orElse("");
    if (code == CONFIG_ERROR) {
      err.println("longsieve run: " + message);
      LOG.debug("longsieve run refused", e);
    } else {
      err.println("longsieve run failed: " + e.getClass().getName() + ": " + message + traceHint());
      FAILURES.error("longsieve run failed", e);
    }
    if (debug) e.printStackTrace(err);
    err.flush();
    return code;
  }

  /** Lists every spark.longsieve.* key under the usage text, so --help documents the config too. */
  static void addKeyList(CommandLine run) {
    run.getCommandSpec().usageMessage().footer("", "Every option is also a key for --conf and --conf-file:",
        RunOptions.knownKeys());
  }

  /** Every layer merged, later over earlier. */
  Map<String, String> settings() {
    Map<String, String> m = new LinkedHashMap<>();
    if (confFile != null) {
      Properties p = new Properties();
      try (Reader r = Files.newBufferedReader(confFile, StandardCharsets.UTF_8)) {
        p.load(r);
      } catch (IOException e) {
        throw new IllegalArgumentException("cannot read --conf-file " + confFile + ": " + e.getMessage());
      }
      for (String k : p.stringPropertyNames()) m.put(k.trim(), p.getProperty(k).trim());
    }
    // spark-submit passes --conf and spark-defaults.conf to the driver as spark.* system properties
    for (Tuple2<String, String> kv : new SparkConf(true).getAll()) {
      if (kv._1().startsWith(RunOptions.PREFIX) || kv._1().equals("spark.master")) m.put(kv._1(), kv._2());
    }
    if (conf != null) {
      for (String c : conf) {
        int eq = c.indexOf('=');
        if (eq <= 0) throw new IllegalArgumentException("--conf needs KEY=VALUE, not '" + c + "'");
        m.put(c.substring(0, eq).trim(), c.substring(eq + 1).trim());
      }
    }
    put(m, RunOptions.Key.INPUT, input);
    put(m, RunOptions.Key.OUTPUT, output);
    put(m, RunOptions.Key.MODEL, model);
    if (master != null) m.put("spark.master", master);
    put(m, RunOptions.Key.RUN_ID, runId);
    put(m, RunOptions.Key.MAX_NEW_TOKENS, maxNewTokens);
    put(m, RunOptions.Key.PROMPT_TEMPLATE_FILE, promptTemplate);
    put(m, RunOptions.Key.JSON_SCHEMA_FILE, jsonSchema);
    put(m, RunOptions.Key.TYPED_OUTPUT, typedOutput);
    put(m, RunOptions.Key.SYSTEM, system);
    put(m, RunOptions.Key.RAW, raw);
    put(m, RunOptions.Key.TEMPERATURE, temperature);
    put(m, RunOptions.Key.TOP_P, topP);
    put(m, RunOptions.Key.SEED, seed);
    if (stop != null) m.put(RunOptions.Key.STOP.conf(), GenerationOptions.formatStop(stop)); // JSON: white space survives
    put(m, RunOptions.Key.DEVICE, device);
    put(m, RunOptions.Key.TRUNCATE, truncate);
    put(m, RunOptions.Key.RESUME, resume);
    if (Boolean.TRUE.equals(resumeAnyway)) {
      m.put(RunOptions.Key.RESUME.conf(), "true");
      m.put(RunOptions.Key.RESUME_ANYWAY.conf(), "true");
    }
    put(m, RunOptions.Key.PREFIX_REUSE, prefixReuse);
    put(m, RunOptions.Key.MAX_TOTAL_TOKENS, maxTotalTokens);
    put(m, RunOptions.Key.MAX_DOCS, maxDocs);
    put(m, RunOptions.Key.AUDIT_FRACTION, auditFraction);
    if (policy != null || prefill != null || kv != null || decode != null) {
      // the flags replace whatever policy the files or --conf gave, as one choice
      m.put(RunOptions.Key.POLICY.conf(), policy);
      m.put(RunOptions.Key.PREFILL.conf(), prefill);
      m.put(RunOptions.Key.KV.conf(), kv);
      m.put(RunOptions.Key.DECODE.conf(), decode);
    }
    return m;
  }

  private static void put(Map<String, String> m, RunOptions.Key k, Object flag) {
    if (flag != null) m.put(k.conf(), flag.toString());
  }

  private static SparkSession session(RunOptions o) {
    SparkSession.Builder b = SparkSession.builder().appName("longsieve " + o.runId()).master(o.master());
    if (o.master().startsWith("local") && !o.sparkConf().containsKey("spark.sql.shuffle.partitions")) {
      // Spark's 200 is sized for clusters; in one JVM it only adds tasks and files
      b.config("spark.sql.shuffle.partitions", Integer.toString(Math.max(2, Runtime.getRuntime().availableProcessors())));
    }
    for (Map.Entry<String, String> e : o.sparkConf().entrySet()) b.config(e.getKey(), e.getValue());
    return b.getOrCreate();
  }
}
