package io.longsieve.structured;

import com.networknt.schema.Error;
import com.networknt.schema.InputFormat;
import com.networknt.schema.Schema;
import com.networknt.schema.SchemaRegistry;
import com.networknt.schema.SpecificationVersion;
import java.util.List;

/**
 * The judge of structured outputs: com.networknt's JSON Schema validator (draft 2020-12), a kept
 * library, never our own grammar. Tests in other packages use it too.
 */
public final class SchemaOracle {

  private static final SchemaRegistry REGISTRY = SchemaRegistry.withDefaultDialect(SpecificationVersion.DRAFT_2020_12);

  private final Schema schema;

  public SchemaOracle(String schemaJson) {
    this.schema = REGISTRY.getSchema(schemaJson, InputFormat.JSON);
  }

  /** The validator's errors for a JSON text; a text that does not parse throws. */
  public List<Error> errors(String json) {
    return schema.validate(json, InputFormat.JSON);
  }

  /** Whether the text parses as JSON and validates. */
  public boolean valid(String json) {
    try {
      return errors(json).isEmpty();
    } catch (RuntimeException notJson) {
      return false;
    }
  }
}
