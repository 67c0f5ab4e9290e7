package io.longsieve.job;

import static org.apache.spark.sql.functions.col;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.sql.Row;
import org.junit.jupiter.api.Test;

/**
 * Runs an operator got wrong before: the output folder inside the input folder, far more partitions
 * than documents, bad lines in two files of the same name, and --resume with another policy.
 */
class RunEdgeCasesTest extends SparkSessionTest {

  @Test
  void anOutputInsideTheInputPartitionsCappedAndFileQualifiedSourcesThenAResumeWithAnotherPolicyIsRefused()
      throws Exception {
    Path in = Files.createDirectories(dir.resolve("in"));
    JobTestSupport.jsonl(Files.createDirectories(in.resolve("a")), "part.jsonl",
        JobTestSupport.json("good", "summary", "The harbour opened.", null), "{not json");
    JobTestSupport.jsonl(Files.createDirectories(in.resolve("b")), "part.jsonl", "{not json either");
    Path out = in.resolve("out");
    String[] common = {"--input", in.toString(), "--output", out.toString()};

    JobTestSupport.Cli first = JobTestSupport.run(concat(common, "--run-id", "first", "--conf",
        "spark.longsieve.partitions=10000"));
    assertEquals(0, first.code(), first.err());
    JsonNode manifest = new ObjectMapper().readTree(out.resolve("runs").resolve("first.json").toFile());
    assertEquals(3, manifest.get("partitions").asInt(), "capped by the 3 input rows");
    assertEquals("[\"out/ (the run's --output)\"]", manifest.get("skipped_input_files").toString());
    Map<String, Row> bySource = new TreeMap<>();
    for (Row r : spark.read().parquet(out.resolve("outputs").toString()).collectAsList()) bySource.put(r.getAs("source"), r);
    assertEquals("[a/part.jsonl:1, a/part.jsonl:2, b/part.jsonl:1]", bySource.keySet().toString());
    for (String bad : new String[] {"a/part.jsonl:2", "b/part.jsonl:1"}) {
      Row r = bySource.get(bad);
      assertEquals(JobSchemas.BAD_INPUT, r.getAs("status"), "its own error, not a duplicate of the other file's line");
      assertEquals(bad, r.getAs("doc_id"));
      String error = r.getAs("error");
      assertTrue(error.startsWith("malformed JSON at " + bad), error);
    }

    JobTestSupport.Cli other = JobTestSupport.run(concat(common, "--run-id", "other", "--resume", "--policy",
        "streaming"));
    assertEquals(2, other.code(), other.err());
    assertTrue(other.lastErrLine().startsWith("longsieve run: --resume: earlier run first made its answers with other "
        + "options (policy 'dense' -> 'dense + streaming:"), other.lastErrLine());
    assertTrue(other.lastErrLine().endsWith("resume with the same options, or give --resume-anyway"), other.lastErrLine());
    assertFalse(Files.exists(out.resolve("runs").resolve("other.started")), "the refused run reserved nothing");

    // the same options resume; the output's own files are not read as input, so its Parquet is no "mixed" input
    JobTestSupport.Cli again = JobTestSupport.run(concat(common, "--run-id", "again", "--resume"));
    assertEquals(0, again.code(), again.err());
    assertEquals(2, spark.read().parquet(out.resolve("outputs").toString()).where(col("run_id").equalTo("again")).count(),
        "the two bad rows run again; the good one was ok");
  }

  private static String[] concat(String[] a, String... b) {
    String[] all = java.util.Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, all, a.length, b.length);
    return all;
  }
}
