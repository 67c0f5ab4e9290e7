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
 * The run manifest {@code <out>/runs/<run_id>.json}, read loosely: the report shows its top-level scalar fields as they
 * are and takes the wall time from the first field that holds one, so a manifest that gains fields needs no change here.
 */
record RunManifest(Map<String, Object> fields) {

  private static final List<String> WALL_MS_KEYS = List.of("wall_ms", "wall_time_ms", "wallMs", "elapsed_ms",
      "duration_ms");
  private static final List<String> WALL_S_KEYS = List.of("wall_s", "wall_seconds", "elapsed_s", "duration_s");
  private static final List<String[]> START_END_KEYS = List.of(new String[] {"started_at", "finished_at"},
      new String[] {"start_time", "end_time"}, new String[] {"startedAt", "finishedAt"},
      new String[] {"started", "finished"});

  static RunManifest empty() {
    return new RunManifest(Map.of());
  }

  /** Reads the manifest of {@code runId} under {@code outputDir} (any Hadoop file system); empty when there is none. */
  static RunManifest read(Configuration conf, Path outputDir, String runId) throws IOException {
    Path file = new Path(new Path(outputDir, "runs"), runId + ".json");
    FileSystem fs = file.getFileSystem(conf);
    if (!fs.exists(file)) {
      return empty();
    }
    try (InputStream in = fs.open(file)) {
      return new RunManifest(new ObjectMapper().readValue(in, new TypeReference<LinkedHashMap<String, Object>>() {}));
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

  /** Top-level fields whose values are plain (strings, numbers, booleans), in file order, for the run table. */
  Map<String, String> scalars() {
    Map<String, String> out = new LinkedHashMap<>();
    fields.forEach((k, v) -> {
      if (v instanceof String || v instanceof Number || v instanceof Boolean) {
        out.put(k, String.valueOf(v));
      } else if (v instanceof List<?> l && l.stream().allMatch(e -> e instanceof String || e instanceof Number)) {
        out.put(k, String.join(", ", l.stream().map(String::valueOf).toList()));
      }
    });
    return out;
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
