package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;

/** The driver's listing of an input folder: recursive, every skip named, one format, one schema. */
class InputFilesTest extends SparkSessionTest {

  private static InputFiles.Listing list(Path input) {
    return InputFiles.list(new Configuration(), input.toString());
  }

  @Test
  void subfoldersAreReadAndEverySkippedFileIsNamed() throws Exception {
    Path in = Files.createDirectories(dir.resolve("in"));
    JobTestSupport.jsonl(in, "top.jsonl", JobTestSupport.json("t", "summary", "Top.", null));
    JobTestSupport.jsonl(Files.createDirectories(in.resolve("2026/12")), "deep.jsonl",
        JobTestSupport.json("d", "summary", "Deep.", null));
    JobTestSupport.jsonl(in, ".hidden.jsonl", JobTestSupport.json("h", "summary", "Hidden.", null));
    JobTestSupport.jsonl(in, "_under.jsonl", JobTestSupport.json("u", "summary", "Under.", null));
    Files.writeString(in.resolve("_SUCCESS"), "");
    JobTestSupport.jsonl(Files.createDirectories(in.resolve("_tmp")), "x.jsonl", "{}");

    InputFiles.Listing l = list(in);
    assertEquals(InputReader.Format.JSONL, l.format());
    assertEquals(2, l.data().size(), l.data().toString());
    assertEquals(List.of(".hidden.jsonl", "_SUCCESS", "_tmp/x.jsonl", "_under.jsonl"), l.skipped());

    Map<String, Row> byId = new TreeMap<>();
    for (Row r : InputReader.read(spark, l).collectAsList()) byId.put(r.getAs("doc_id"), r);
    assertEquals(List.of("d", "t"), List.copyOf(byId.keySet()), "the subfolder's rows are read, the skipped are not");
  }

  @Test
  void aFolderWithOnlySkippedFilesIsRefusedNamingThem() throws Exception {
    Path in = Files.createDirectories(dir.resolve("only"));
    JobTestSupport.jsonl(in, ".data.jsonl", "{}");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> list(in));
    assertEquals("input folder " + in + " holds no data files (skipped: .data.jsonl)", e.getMessage());
  }

  @Test
  void parquetMixedWithJsonlIsRefusedInOneLineNamingFilesOfBoth() throws Exception {
    Path in = Files.createDirectories(dir.resolve("mixed"));
    JobTestSupport.jsonl(in, "a.jsonl", JobTestSupport.json("a", "summary", "A.", null));
    Path pq = dir.resolve("pq");
    spark.sql("select 'p' as doc_id, 'summary' as task, 'P.' as text").coalesce(1).write().parquet(pq.toString());
    try (var files = Files.list(pq)) {
      Path part = files.filter(f -> f.toString().endsWith(".parquet")).findFirst().orElseThrow();
      Files.copy(part, in.resolve("b.parquet"));
    }
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> list(in));
    assertEquals("input " + in + " mixes Parquet files (b.parquet) and JSONL files (a.jsonl); give one format per --input",
        e.getMessage());
  }

  @Test
  void parquetFilesThatDisagreeOnAColumnTypeAreRefusedNamingBoth() throws Exception {
    Path in = Files.createDirectories(dir.resolve("schemas"));
    spark.sql("select 'a' as doc_id, 'summary' as task, 'A.' as text").coalesce(1).write()
        .parquet(in.resolve("one").toString());
    spark.sql("select 7L as doc_id, 'summary' as task, 'B.' as text").coalesce(1).write()
        .parquet(in.resolve("two").toString());
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> list(in));
    assertTrue(e.getMessage().startsWith("input " + in + ": Parquet files disagree on column 'doc_id': part-"), e.getMessage());
    assertTrue(e.getMessage().contains("binary doc_id (STRING)") && e.getMessage().contains("int64 doc_id"), e.getMessage());
    assertFalse(e.getMessage().contains("\n"), "one line");
  }

  @Test
  void parquetFilesWithDifferentColumnsAreReadTogether() throws Exception {
    Path in = Files.createDirectories(dir.resolve("columns"));
    spark.sql("select 'a' as doc_id, 'summary' as task, 'A.' as text").coalesce(1).write()
        .parquet(in.resolve("one").toString());
    spark.sql("select 'b' as doc_id, 'qa' as task, 'B.' as text, 'Why?' as question").coalesce(1).write()
        .parquet(in.resolve("two").toString());
    Map<String, Row> byId = new TreeMap<>();
    for (Row r : InputReader.read(spark, list(in)).collectAsList()) byId.put(r.getAs("doc_id"), r);
    assertNull(byId.get("a").getAs("status"));
    assertNull(byId.get("b").getAs("status"), "the question of the second file's schema is read");
    assertEquals("Why?", byId.get("b").getAs("question"));
  }

  @Test
  void aRunTemplateNamingNoParquetColumnIsRefusedBeforeTheRun() throws Exception {
    Path in = Files.createDirectories(dir.resolve("template"));
    spark.sql("select 'a' as doc_id, 'A.' as text, 'en' as lang").coalesce(1).write().parquet(in.resolve("one").toString());
    assertEquals(java.util.Set.of("doc_id", "text", "lang"), list(in).columns(), "every file's columns, from the footers");
    RunOptions o = JobTestSupport.options(in, dir.resolve("out"), "t1", Map.of("spark.longsieve.promptTemplate",
        "In {language}: {text}"));
    IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
        () -> LongSieveJob.check(o, new org.apache.hadoop.conf.Configuration()));
    assertEquals("--prompt-template: the prompt template's {language} is not a column of input " + in
        + " (columns: doc_id, lang, text)", e.getMessage());
    assertFalse(Files.exists(dir.resolve("out")), "refused before the output is touched");
  }
}
