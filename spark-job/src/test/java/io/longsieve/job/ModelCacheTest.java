package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A model given as a Hadoop URI (file: here; hdfs: and s3a: go through the same FileSystem API) is
 * copied once to local disk, reused while its files are unchanged, copied again when they change,
 * and a run with such a --model works end to end.
 */
class ModelCacheTest {

  @TempDir
  static Path dir;

  static Path copyOfTestModel(String name) throws IOException {
    Path m = dir.resolve(name);
    Files.createDirectories(m);
    try (Stream<Path> s = Files.list(JobTestSupport.MODEL)) {
      for (Path f : s.filter(Files::isRegularFile).toList()) Files.copy(f, m.resolve(f.getFileName()));
    }
    return m;
  }

  @Test
  void aUriModelIsCopiedOnceAndAgainWhenItChanges() throws IOException {
    Path model = copyOfTestModel("model-a");
    Path cache = dir.resolve("cache");
    String uri = model.toUri().toString();
    assertTrue(uri.startsWith("file:") && ModelCache.isUri(uri) && !ModelCache.isUri(model.toString()));
    Configuration conf = new Configuration();
    String first = ModelCache.copy(uri, conf, cache);
    assertTrue(Files.exists(Path.of(first, "config.json")) && Files.exists(Path.of(first, ModelCache.COMPLETE)));
    FileTime stamp = Files.getLastModifiedTime(Path.of(first, "config.json"));
    assertEquals(first, ModelCache.copy(uri, conf, cache), "unchanged: the same copy");
    assertEquals(stamp, Files.getLastModifiedTime(Path.of(first, "config.json")), "not copied again");
    Files.setLastModifiedTime(model.resolve("config.json"), FileTime.fromMillis(System.currentTimeMillis() + 60_000));
    String second = ModelCache.copy(uri, conf, cache);
    assertNotEquals(first, second, "a changed model gets a new copy");
    try (Stream<Path> s = Files.list(cache)) {
      assertFalse(s.anyMatch(p -> p.getFileName().toString().startsWith("copy-")), "no half-made copies left");
    }
  }

  @Test
  void aRunWithAFileUriModelWorks() throws IOException {
    Path model = copyOfTestModel("model-run");
    SparkSession spark = JobTestSupport.session();
    try {
      Path in = JobTestSupport.jsonl(dir, "docs.jsonl", JobTestSupport.json("a", "summary", "The bridge reopened.", null));
      RunSummary s = LongSieveJob.run(spark, JobTestSupport.options(in, dir.resolve("out"), "uri",
          Map.of("spark.longsieve.model", model.toUri().toString())));
      assertEquals(1L, s.byStatus().get(JobSchemas.OK), s.line());
    } finally {
      spark.stop();
    }
  }
}
