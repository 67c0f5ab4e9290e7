package io.longsieve.job;

import com.networknt.schema.Error;
import com.networknt.schema.InputFormat;
import com.networknt.schema.Schema;
import com.networknt.schema.SchemaRegistry;
import com.networknt.schema.SpecificationVersion;
import java.util.List;

/** The networknt JSON Schema validator (draft 2020-12) judging the job's structured outputs: a kept library, not our grammar. */
final class SchemaJudge {

  private static final SchemaRegistry REGISTRY = SchemaRegistry.withDefaultDialect(SpecificationVersion.DRAFT_2020_12);

  private final Schema schema;

  SchemaJudge(String schemaJson) {
    this.schema = REGISTRY.getSchema(schemaJson, InputFormat.JSON);
  }

  /** The validator's errors for a JSON text; a text that does not parse throws. */
  List<Error> errors(String json) {
    return schema.validate(json, InputFormat.JSON);
  }

  boolean valid(String json) {
    try {
      return errors(json).isEmpty();
    } catch (RuntimeException notJson) {
      return false;
    }
  }
}
