package io.longsieve.job;

import java.util.Iterator;
import java.util.Map;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.expressions.GenericRowWithSchema;

/**
 * Numbers the lines of a text scan (value, valid_utf8, file_name, file_path, block_start) into
 * {@link JobSchemas#LINE} rows. A task reads its blocks one after another, each from its start, so
 * counting within a block gives the position there; adding the lines of the file's earlier blocks
 * (computed beforehand; empty when no file was split) gives the line in the file.
 */
final class LineNumberer implements MapPartitionsFunction<Row, Row> {

  private final Map<String, Long> linesBefore;

  LineNumberer(Map<String, Long> linesBefore) {
    this.linesBefore = Map.copyOf(linesBefore);
  }

  static String blockKey(String filePath, long blockStart) {
    return blockStart + "@" + filePath;
  }

  @Override
  public Iterator<Row> call(Iterator<Row> rows) {
    return new Iterator<>() {
      private String block;
      private long line;

      @Override
      public boolean hasNext() {
        return rows.hasNext();
      }

      @Override
      public Row next() {
        Row r = rows.next();
        String path = r.getString(3);
        long start = r.getLong(4);
        String key = blockKey(path, start);
        if (!key.equals(block)) {
          if (start > 0 && !linesBefore.containsKey(key)) {
            throw new IllegalStateException("no line count for block " + key + " (the input changed during the run?)");
          }
          block = key;
          line = linesBefore.getOrDefault(key, 0L);
        }
        line++;
        return new GenericRowWithSchema(new Object[] {r.getString(0), r.isNullAt(1) || r.getBoolean(1), r.getString(2),
            path, line}, JobSchemas.LINE);
      }
    };
  }
}
