package io.longsieve.job;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;

/**
 * {@code --resume} only continues runs that made their answers the same way: a resumed run whose
 * model, policy, max_new_tokens, sampling (temperature, top_p, seed, stop) or prompt (template, system
 * message, raw) differs from an earlier run it skips against is refused before Spark starts, naming each
 * difference, unless {@code --resume-anyway}: the merged results (one ok row per document across the
 * runs) would otherwise mix configurations without a word.
 *
 * <p>Each run records these options in its start record {@code runs/<run_id>.started}
 * ({@link OutputLock}), written before Spark starts, so a run killed before its manifest has them too;
 * runs from before this record are compared by their manifest's {@code options}, or skipped with a log
 * line when they have neither. Only runs with rows in {@code outputs/} are compared: the others
 * resume nothing.
 */
final class ResumeCheck {
  private ResumeCheck() {}

  private static final Logger LOG = LogManager.getLogger(ResumeCheck.class);
  private static final ObjectMapper JSON = new ObjectMapper();

  /** The options that decide a document's answer, by their spark.longsieve.* name. */
  static final List<RunOptions.Key> ANSWER_KEYS = List.of(RunOptions.Key.MODEL, RunOptions.Key.POLICY,
      RunOptions.Key.MAX_NEW_TOKENS, RunOptions.Key.TEMPERATURE, RunOptions.Key.TOP_P, RunOptions.Key.SEED,
      RunOptions.Key.STOP, RunOptions.Key.PROMPT_TEMPLATE, RunOptions.Key.SYSTEM, RunOptions.Key.RAW);

  /** This run's answer-making options, as the start record holds them (a local model path made absolute). */
  static Map<String, String> answerOptions(RunOptions o) {
    return answerOptions(o.asSettings());
  }

  private static Map<String, String> answerOptions(Map<String, ?> settings) {
    Map<String, String> m = new LinkedHashMap<>();
    for (RunOptions.Key k : ANSWER_KEYS) {
      Object v = settings.get(k.conf());
      String s = v == null ? null : v.toString();
      if (k == RunOptions.Key.MODEL && s != null && !ModelCache.isUri(s)) s = java.nio.file.Path.of(s).toAbsolutePath().normalize().toString();
      m.put(k.conf(), s);
    }
    return m;
  }

  /**
   * @throws IllegalArgumentException one line naming the first earlier run that differs and every
   *     difference, when {@code o} resumes without resumeAnyway
   */
  static void require(RunOptions o, Configuration conf) {
    if (!o.production().resume() || o.production().resumeAnyway()) return;
    Map<String, String> mine = answerOptions(o);
    Path output = new Path(o.output());
    try {
      FileSystem fs = output.getFileSystem(conf);
      for (String run : Resume.runIds(fs, new Path(output, "outputs"))) {
        Map<String, String> theirs = recorded(fs, o.output(), run);
        if (theirs == null) {
          LOG.info("--resume: run {} recorded no options; its answers are taken as they are", run);
          continue;
        }
        List<String> differences = new ArrayList<>();
        for (Map.Entry<String, String> e : mine.entrySet()) {
          String was = theirs.get(e.getKey());
          if (!java.util.Objects.equals(was, e.getValue())) {
            differences.add(e.getKey().substring(RunOptions.PREFIX.length()) + " " + show(was) + " -> " + show(e.getValue()));
          }
        }
        if (!differences.isEmpty()) {
          throw new IllegalArgumentException("--resume: earlier run " + run + " made its answers with other options ("
              + String.join("; ", differences) + "), so the merged results would mix them: resume with the same "
              + "options, or give --resume-anyway");
        }
      }
    } catch (IOException e) {
      throw new IllegalArgumentException("--resume: cannot read the earlier runs under " + o.output() + ": " + e.getMessage(), e);
    }
  }

  /** An earlier run's answer-making options: its start record's, else its manifest's; null when neither has them. */
  private static Map<String, String> recorded(FileSystem fs, String output, String run) throws IOException {
    JsonNode started = read(fs, OutputLock.startedPath(output, run));
    if (started != null && started.has("answers")) return strings(started.get("answers"));
    JsonNode manifest = read(fs, RunManifest.path(output, run));
    if (manifest != null && manifest.has("options")) {
      Map<String, String> all = strings(manifest.get("options"));
      for (RunOptions.Key k : ANSWER_KEYS) all.putIfAbsent(k.conf(), null);
      return answerOptions(all);
    }
    return null;
  }

  private static JsonNode read(FileSystem fs, Path p) {
    try (InputStream in = fs.open(p)) {
      return JSON.readTree(in);
    } catch (IOException | RuntimeException e) { // absent, or torn: nothing to compare with
      return null;
    }
  }

  private static Map<String, String> strings(JsonNode object) {
    Map<String, String> m = new LinkedHashMap<>();
    for (Iterator<Map.Entry<String, JsonNode>> it = object.fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      m.put(e.getKey(), e.getValue().isNull() ? null : e.getValue().asText());
    }
    return m;
  }

  private static String show(String v) {
    if (v == null) return "(none)";
    return v.length() <= 80 ? "'" + v + "'" : "'" + v.substring(0, 77) + "...'";
  }
}
