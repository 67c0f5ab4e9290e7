package io.longsieve.job;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.expressions.GenericRowWithSchema;
import org.apache.spark.sql.types.StructType;

/**
 * A row of a job schema filled in by column name: a new column is one line in {@link JobSchemas} and
 * one {@code set} where its value is known, never a position to keep in step. Columns left unset are null.
 */
final class ResultRow {
  private final StructType schema;
  private final Object[] values;

  ResultRow(StructType schema) {
    this.schema = schema;
    this.values = new Object[schema.size()];
  }

  /** @throws IllegalArgumentException for a name the schema does not have (a typo fails every test, not a run) */
  ResultRow set(String column, Object value) {
    values[schema.fieldIndex(column)] = value;
    return this;
  }

  Row build() {
    return new GenericRowWithSchema(values.clone(), schema);
  }
}
