package io.longsieve.job;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.SparkSession;

/**
 * {@code DIR/runs/<run_id>.json}: what ran (input, options, versions, backend) and what came out
 * (counts by status, tokens, start and end time). Written last, so its presence means the run's
 * outputs and stats are complete; written atomically ({@link AtomicFiles}), so a manifest is whole.
 */
public final class RunManifest {
  private RunManifest() {}

  /** This build's LongSieve version, from the Maven-filtered resource; "unknown" outside a build. */
  public static String longsieveVersion() {
    try (InputStream in = RunManifest.class.getResourceAsStream("version.properties")) {
      if (in == null) return "unknown";
      Properties p = new Properties();
      p.load(in);
      return p.getProperty("version", "unknown");
    } catch (IOException e) {
      return "unknown";
    }
  }

  /** The manifest's path under the output root. */
  public static Path path(String output, String runId) {
    return new Path(new Path(output, "runs"), runId + ".json");
  }

  static Map<String, Object> content(SparkSession spark, RunOptions o, InputReader.Format format, RunSummary s) {
    return content(spark, o, format, s, Map.of());
  }

  /** The manifest, with {@code extra} entries (e.g. resumed_from: the earlier runs a --resume run skipped against). */
  static Map<String, Object> content(SparkSession spark, RunOptions o, InputReader.Format format, RunSummary s,
      Map<String, Object> extra) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("run_id", o.runId());
    m.put("input", o.input());
    m.put("input_format", format.name().toLowerCase(java.util.Locale.ROOT));
    m.put("output", o.output());
    m.put("model", o.model());
    m.put("start", s.start().toString());
    m.put("end", s.end().toString());
    m.put("seconds", s.seconds());
    m.put("rows", s.rows());
    m.put("counts", s.byStatus());
    m.put("input_tokens", s.inputTokens());
    m.put("output_tokens", s.outputTokens());
    m.put("docs_per_s", s.rows() / s.seconds());
    m.put("output_tokens_per_s", s.outputTokens() / s.seconds());
    m.put("backend", s.backends().size() == 1 ? s.backends().get(0) : String.join(",", s.backends()));
    m.put("devices", s.devices());
    m.put("options", o.asSettings());
    m.put("spark_conf", o.sparkConf());
    Map<String, String> versions = new LinkedHashMap<>();
    versions.put("longsieve", longsieveVersion());
    versions.put("spark", spark.version());
    versions.put("scala", scala.util.Properties.versionNumberString());
    versions.put("java", System.getProperty("java.version") + " (" + System.getProperty("java.vendor") + ")");
    m.put("versions", versions);
    m.put("spark_master", spark.sparkContext().master());
    m.put("spark_app_id", spark.sparkContext().applicationId());
    m.putAll(extra);
    return m;
  }

  static void write(SparkSession spark, RunOptions o, InputReader.Format format, RunSummary s) {
    write(spark, o, format, s, Map.of());
  }

  static void write(SparkSession spark, RunOptions o, InputReader.Format format, RunSummary s, Map<String, Object> extra) {
    Path p = path(o.output(), o.runId());
    try {
      // whole or not at all: a manifest is the run's "finished" mark, so a torn one must not exist
      AtomicFiles.write(p, new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT)
          .writeValueAsBytes(content(spark, o, format, s, extra)), spark.sparkContext().hadoopConfiguration());
    } catch (IOException e) {
      throw new UncheckedIOException("cannot write the run manifest " + p + ": " + e.getMessage(), e);
    }
  }
}
