package io.longsieve.report;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * The run manifest {@code <out>/runs/<run_id>.json} (written by {@link io.longsieve.job.RunManifest}), read loosely: the report shows its top-level scalar fields as they
 * are and takes the wall time from the first field that holds one, so a manifest that gains fields needs no change here.
 */
record ManifestFields(Map<String, Object> fields, String torn) {

  /** A manifest as read; {@code torn} says why a file that is there could not be read (null: it could). */
  ManifestFields(Map<String, Object> fields) {
    this(fields, null);
  }

  private static final List<String> WALL_MS_KEYS = List.of("wall_ms", "wall_time_ms", "wallMs", "elapsed_ms",
      "duration_ms");
  private static final List<String> WALL_S_KEYS = List.of("seconds", "wall_s", "wall_seconds",
      "elapsed_s", "duration_s");
  private static final List<String[]> START_END_KEYS = List.of(new String[] {"start", "end"},
      new String[] {"started_at", "finished_at"},
      new String[] {"start_time", "end_time"}, new String[] {"startedAt", "finishedAt"},
      new String[] {"started", "finished"});

  static ManifestFields empty() {
    return new ManifestFields(Map.of());
  }

  /**
   * Reads the manifest of {@code runId} under {@code outputDir} (any Hadoop file system); empty when there is none,
   * and empty with {@link #torn} set when the file is there but is not a whole JSON object (a manifest cut short
   * by a full disk before manifests were written atomically): the report is then made from the tables alone.
   */
  static ManifestFields read(Configuration conf, Path outputDir, String runId) throws IOException {
    Path file = new Path(new Path(outputDir, "runs"), runId + ".json");
    FileSystem fs = file.getFileSystem(conf);
    if (!fs.exists(file)) {
      return empty();
    }
    try (InputStream in = fs.open(file)) {
      Map<String, Object> m = new ObjectMapper().readValue(in, new TypeReference<LinkedHashMap<String, Object>>() {});
      return m == null ? new ManifestFields(Map.of(), "runs/" + runId + ".json is empty") : new ManifestFields(m);
    } catch (com.fasterxml.jackson.core.JacksonException e) {
      return new ManifestFields(Map.of(), "runs/" + runId + ".json is torn (" + fs.getFileStatus(file).getLen()
          + " bytes, not a whole JSON object)");
    }
  }

  /** Wall time of the run in milliseconds, or NaN when the manifest does not say. */
  double wallMs() {
    for (String k : WALL_MS_KEYS) {
      if (fields.get(k) instanceof Number n) {
        return n.doubleValue();
      }
    }
    for (String k : WALL_S_KEYS) {
      if (fields.get(k) instanceof Number n) {
        return n.doubleValue() * 1000;
      }
    }
    for (String[] k : START_END_KEYS) {
      Instant a = instant(fields.get(k[0]));
      Instant b = instant(fields.get(k[1]));
      if (a != null && b != null) {
        return Duration.between(a, b).toNanos() / 1e6;
      }
    }
    return Double.NaN;
  }

  /**
   * Fields whose values are plain (strings, numbers, booleans, lists of them), in file order, for the run table; one
   * level of nested objects is flattened to {@code parent.key} (options, counts, versions).
   */
  Map<String, String> scalars() {
    Map<String, String> out = new LinkedHashMap<>();
    fields.forEach((k, v) -> {
      if (v instanceof Map<?, ?> m) {
        m.forEach((k2, v2) -> put(out, k + "." + k2, v2));
      } else {
        put(out, k, v);
      }
    });
    return out;
  }

  private static void put(Map<String, String> out, String key, Object v) {
    if (v instanceof String || v instanceof Number || v instanceof Boolean) {
      out.put(key, String.valueOf(v));
    } else if (v instanceof List<?> l && l.stream().allMatch(e -> e instanceof String || e instanceof Number)) {
      out.put(key, String.join(", ", l.stream().map(String::valueOf).toList()));
    }
  }

  private static Instant instant(Object v) {
    if (v instanceof Number n) {
      return Instant.ofEpochMilli(n.longValue());
    }
    if (v instanceof String s) {
      try {
        return Instant.parse(s);
      } catch (DateTimeParseException e) {
        return null;
      }
    }
    return null;
  }
}
