package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;

/** Reading JSONL and Parquet on the executors: positions, invalid bytes, repeated ids. */
class InputReaderTest extends SparkSessionTest {

  /** Parsed rows by source ("file:line"). */
  private static Map<String, Row> read(Path input) {
    Map<String, Row> bySource = new TreeMap<>();
    for (Row r : InputReader.read(spark, input.toString()).collectAsList()) bySource.put(r.getAs("source"), r);
    return bySource;
  }

  @Test
  void blankLinesAreSkippedButCountedSoIdsMatchEditorLines() {
    Path in = JobTestSupport.jsonl(dir, "docs.jsonl",
        JobTestSupport.json("a", "summary", "One.", null),
        "",
        "{\"task\":\"summary\",\"text\":\"No id.\"}");
    Map<String, Row> rows = read(in);
    assertEquals(2, rows.size());
    Row noId = rows.get("docs.jsonl:3");
    assertEquals("docs.jsonl:3", noId.getAs("source"));
    assertNull(noId.getAs("status"), "a row without doc_id is processed normally");
  }

  @Test
  void linesAreNumberedPerFileAcrossSplits() {
    // tiny splits: the file is read by several tasks, the numbering must still be the file's
    List<String> lines = new ArrayList<>();
    for (int i = 1; i <= 24; i++) lines.add("{\"task\":\"summary\",\"text\":\"Line number " + i + " of the file.\"}");
    Path in = JobTestSupport.jsonl(dir, "many.jsonl", lines.toArray(String[]::new));
    spark.conf().set("spark.sql.files.maxPartitionBytes", "500");
    try {
      assertTrue(spark.read().text(in.toString()).rdd().getNumPartitions() > 1, "the file is split");
      Map<String, Row> rows = read(in);
      assertEquals(24, rows.size());
      for (Row r : rows.values()) {
        String text = r.getAs("text");
        long line = r.getAs("line");
        assertEquals("Line number " + line + " of the file.", text);
        assertEquals("many.jsonl:" + line, r.getAs("source"));
      }
    } finally {
      spark.conf().unset("spark.sql.files.maxPartitionBytes");
    }
  }

  @Test
  void invalidUtf8BytesAreBadInput() throws IOException {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    bytes.write((JobTestSupport.json("good", "summary", "Fine text.", null) + "\n").getBytes(StandardCharsets.UTF_8));
    bytes.write("{\"doc_id\":\"bad\",\"task\":\"summary\",\"text\":\"caf".getBytes(StandardCharsets.UTF_8));
    bytes.write(new byte[] {(byte) 0xC3, (byte) 0x28}); // a lead byte followed by a non-continuation byte
    bytes.write("\"}\n".getBytes(StandardCharsets.UTF_8));
    Path in = dir.resolve("bytes.jsonl");
    Files.write(in, bytes.toByteArray());
    Map<String, Row> rows = read(in);
    assertNull(rows.get("bytes.jsonl:1").getAs("status"));
    Row bad = rows.get("bytes.jsonl:2");
    assertEquals(JobSchemas.BAD_INPUT, bad.getAs("status"));
    assertEquals("invalid UTF-8 in bytes.jsonl:2", bad.getAs("error"));
  }

  @Test
  void laterRowsOfARepeatedDocIdAreDuplicates() {
    Path in = JobTestSupport.jsonl(dir, "dup.jsonl",
        JobTestSupport.json("x", "summary", "First.", null),
        JobTestSupport.json("y", "summary", "Other.", null),
        JobTestSupport.json("x", "summary", "Second.", null),
        JobTestSupport.json("x", "summary", "Third.", null));
    Map<String, Row> rows = read(in);
    assertNull(rows.get("dup.jsonl:1").getAs("status"), "the first row keeps the id");
    assertNull(rows.get("dup.jsonl:2").getAs("status"));
    for (String later : List.of("dup.jsonl:3", "dup.jsonl:4")) {
      assertEquals(JobSchemas.DUPLICATE_ID, rows.get(later).getAs("status"));
      assertEquals("doc_id 'x' was already used by the row at dup.jsonl:1", rows.get(later).getAs("error"));
    }
  }

  @Test
  void parquetRowsAreCheckedLikeJsonLines() {
    StructType schema = new StructType()
        .add("doc_id", DataTypes.StringType)
        .add("task", DataTypes.StringType)
        .add("text", DataTypes.StringType)
        .add("documents", DataTypes.createArrayType(JobSchemas.DOCUMENT))
        .add("question", DataTypes.StringType);
    List<Row> data = List.of(
        RowFactory.create("p1", "summary", "A parquet document.", null, null),
        RowFactory.create(null, "summary", "No id in this one.", null, null),
        RowFactory.create("p3", "multi_doc_qa", null,
            JobSchemas.seq(List.of(RowFactory.create("A", "Alpha."), RowFactory.create("B", "Beta."))), "Which?"),
        RowFactory.create("p4", "poem", "Unknown task.", null, null));
    Path out = dir.resolve("in.parquet");
    spark.createDataFrame(data, schema).coalesce(1).write().parquet(out.toString());

    assertEquals(InputReader.Format.PARQUET, InputReader.format(spark, out.toString()));
    Map<String, Row> byId = new TreeMap<>();
    for (Row r : InputReader.read(spark, out.toString()).collectAsList()) byId.put(r.getAs("doc_id"), r);
    assertNull(byId.get("p1").getAs("status"));
    Row generated = byId.values().stream().filter(r -> r.<Boolean>getAs("id_generated")).findFirst().orElseThrow();
    assertTrue(generated.<String>getAs("source").matches("part-.*\\.parquet:2"), generated.toString());
    assertEquals(2, byId.get("p3").getList(byId.get("p3").fieldIndex("documents")).size());
    assertEquals(JobSchemas.BAD_INPUT, byId.get("p4").getAs("status"));
    assertEquals("unknown task 'poem' (known: summary, qa, multi_doc_qa)", byId.get("p4").getAs("error"));
  }

  @Test
  void formatIsFoundByContentWhenTheNameSaysNothing() throws IOException {
    Path jsonl = JobTestSupport.jsonl(dir, "docs.data", JobTestSupport.json("a", "summary", "x", null));
    assertEquals(InputReader.Format.JSONL, InputReader.format(spark, jsonl.toString()));
    Path pq = dir.resolve("pq");
    spark.range(3).write().parquet(pq.toString());
    Path part;
    try (var files = Files.list(pq)) {
      part = files.filter(f -> f.getFileName().toString().endsWith(".parquet")).findFirst().orElseThrow();
    }
    Path renamed = dir.resolve("table.bin");
    Files.copy(part, renamed);
    assertEquals(InputReader.Format.PARQUET, InputReader.format(spark, renamed.toString()));
  }
}
