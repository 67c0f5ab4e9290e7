package io.longsieve.job;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.SparkSession;

/** What the job's tests share: a small Spark session, the test model, input files. */
final class JobTestSupport {
  private JobTestSupport() {}

  /** The tiny Llama (GQA, 4 layers, 64 wide, 2048 positions) committed with the engine's tests. */
  static final Path MODEL = Path.of("..", "gpu-engine", "src", "test", "resources", "models", "llama-gqa")
      .toAbsolutePath().normalize();

  /** Local mode with two task slots, no UI, few shuffle partitions: small data, fast start. */
  static SparkSession session() {
    return SparkSession.builder()
        .master("local[2]")
        .appName("longsieve-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate();
  }

  /** Writes lines as a UTF-8 JSONL file. */
  static Path jsonl(Path dir, String name, String... lines) {
    try {
      Path p = dir.resolve(name);
      Files.writeString(p, String.join("\n", lines) + "\n", StandardCharsets.UTF_8);
      return p;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Options for a run over {@code input} with the test model; {@code extra} spark.longsieve.* keys override. */
  static RunOptions options(Path input, Path output, String runId, Map<String, String> extra) {
    Map<String, String> m = new java.util.LinkedHashMap<>();
    m.put("spark.longsieve.input", input.toString());
    m.put("spark.longsieve.output", output.toString());
    m.put("spark.longsieve.model", MODEL.toString());
    m.put("spark.longsieve.runId", runId);
    m.put("spark.longsieve.maxNewTokens", "4");
    m.put("spark.longsieve.device", "cpu");
    m.put("spark.longsieve.threads", "1");
    m.put("spark.master", "local[2]");
    m.putAll(extra);
    return RunOptions.fromSettings(m);
  }

  static String json(String docId, String task, String text, String question) {
    StringBuilder sb = new StringBuilder("{");
    if (docId != null) sb.append("\"doc_id\":\"").append(docId).append("\",");
    sb.append("\"task\":\"").append(task).append("\",\"text\":\"").append(text).append('"');
    if (question != null) sb.append(",\"question\":\"").append(question).append('"');
    return sb.append('}').toString();
  }

  /** What a command printed and returned. */
  record Cli(int code, String out, String err) {
    /** stderr's last line: the one a failing command ends with. */
    String lastErrLine() {
      List<String> l = err.strip().lines().toList();
      return l.isEmpty() ? "" : l.get(l.size() - 1);
    }
  }

  /** {@code longsieve ARGS} in this JVM (its Spark session, if one is active), stdout and stderr captured. */
  static Cli cli(String... args) {
    java.io.StringWriter so = new java.io.StringWriter();
    java.io.StringWriter se = new java.io.StringWriter();
    picocli.CommandLine cl = JobCli.commandLine();
    cl.setOut(new java.io.PrintWriter(so, true));
    cl.setErr(new java.io.PrintWriter(se, true));
    int code = cl.execute(args);
    return new Cli(code, so.toString(), se.toString());
  }

  /**
   * {@code longsieve run} with the test model on the CPU in local[2], few tokens, no HTML report (50 of a
   * tiny run's 66 Spark jobs; {@code --conf spark.longsieve.report=true} among {@code args} turns it on), and
   * {@code args}.
   */
  static Cli run(String... args) {
    List<String> all = new java.util.ArrayList<>(List.of("run", "--model", MODEL.toString(), "--master", "local[2]",
        "--device", "cpu", "--max-new-tokens", "2", "--conf", "spark.longsieve.threads=1", "--conf", "spark.ui.enabled=false",
        "--conf", "spark.longsieve.report=false"));
    all.addAll(List.of(args));
    return cli(all.toArray(String[]::new));
  }

  static List<String> words(int n) {
    String[] pool = {"river", "harbour", "council", "budget", "winter", "station", "market", "school", "bridge", "farm"};
    String[] out = new String[n];
    for (int i = 0; i < n; i++) out[i] = pool[(i * 7) % pool.length];
    return List.of(out);
  }
}
