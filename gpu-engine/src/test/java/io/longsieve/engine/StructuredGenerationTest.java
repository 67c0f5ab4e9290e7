package io.longsieve.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.bootstrap.Backends;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.SamplingParams;
import io.longsieve.policy.PolicySpec;
import io.longsieve.structured.OutputSchema;
import io.longsieve.structured.SchemaOracle;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Constrained decoding through the batching engine on the CPU backend, judged by the networknt
 * validator: 200 rows of a nested schema on a tiny checkpoint and rows on the bundled needle model,
 * greedy and at temperature 1.0, every attention policy, per-row schemas mixed with free rows in one
 * batch (free rows unchanged), and a document cut by max_new_tokens.
 */
class StructuredGenerationTest {

  /** Nested: an object holding an enum, bounded numbers, a pattern, an array of objects, anyOf and a $ref. */
  static final String NESTED = """
      {"$defs": {"score": {"type": "number", "minimum": 0, "exclusiveMaximum": 10}},
       "type": "object", "additionalProperties": false, "required": ["kind", "count", "items", "note"],
       "properties": {
         "kind": {"enum": ["contract", "invoice", "letter"]},
         "count": {"type": "integer", "minimum": -3, "maximum": 2000},
         "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{2,3}$"},
         "items": {"type": "array", "minItems": 1, "maxItems": 3, "items": {
           "type": "object", "required": ["name"], "additionalProperties": false,
           "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 6},
                          "score": {"$ref": "#/$defs/score"},
                          "flag": {"type": ["boolean", "null"]}}}},
         "note": {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]}}}""";

  static final String SMALL = "{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":99},\"maxItems\":4}";

  static Engine open(String model) {
    return Backends.open(EngineSpec.of(Path.of(model)).withDevice("cpu").withThreads(2).withMaxBatch(8));
  }

  static List<GenerationRequest> rows(int n, OutputSchema schema, int maxNew) {
    List<GenerationRequest> rs = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      rs.add(GenerationRequest.chat("r" + i, "Fill the record for document " + i + ".", maxNew).withJsonSchema(schema)
          .withSampling(i % 2 == 0 ? SamplingParams.GREEDY : new SamplingParams(1.0, 1.0, 1000 + i)));
    }
    return rs;
  }

  static void assertValid(SchemaOracle oracle, GenerationResult r, String where) {
    assertEquals(FinishReason.JSON_COMPLETE, r.finishReason(), where + ": " + r.text());
    assertTrue(oracle.errors(r.text()).isEmpty(), where + ": " + oracle.errors(r.text()) + " in " + r.text());
  }

  @Test
  void twoHundredNestedRowsValidateGreedyAndSampled() {
    SchemaOracle oracle = new SchemaOracle(NESTED);
    try (Engine e = open("src/test/resources/models/llama-gqa")) {
      List<GenerationResult> out = e.generate(rows(200, OutputSchema.parse(NESTED), 400));
      for (GenerationResult r : out) assertValid(oracle, r, r.id());
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"../models/longsieve-needle-7m", "src/test/resources/models/qwen2-bias",
      "src/test/resources/models/llama-tied", "src/test/resources/models/llama-bf16"})
  void otherModelsValidate(String model) {
    SchemaOracle oracle = new SchemaOracle(NESTED);
    try (Engine e = open(model)) {
      for (GenerationResult r : e.generate(rows(8, OutputSchema.parse(NESTED), 600))) {
        assertValid(oracle, r, model + " " + r.id());
      }
    }
  }

  @Test
  void everyPolicyValidates() {
    SchemaOracle oracle = new SchemaOracle(NESTED);
    OutputSchema schema = OutputSchema.parse(NESTED);
    try (Engine e = open("src/test/resources/models/llama-gqa")) {
      for (String p : new String[] {"tokenselect:k=8,sinks=2,window=4", "tsa", "selkv:ratio=0.5", "snapkv", "h2o",
          "streaming", "quest", "tsa + selkv:ratio=0.5 + tokenselect"}) {
        List<GenerationRequest> rs = new ArrayList<>();
        for (GenerationRequest r : rows(4, schema, 400)) rs.add(r.withPolicy(PolicySpec.parse(p)));
        for (GenerationResult r : e.generate(rs)) assertValid(oracle, r, p + " " + r.id());
      }
    }
  }

  @Test
  void perRowSchemasMixWithFreeRowsInOneBatch() {
    SchemaOracle nested = new SchemaOracle(NESTED), small = new SchemaOracle(SMALL);
    OutputSchema a = OutputSchema.parse(NESTED), b = OutputSchema.parse(SMALL);
    try (Engine e = open("src/test/resources/models/llama-gqa")) {
      List<GenerationRequest> rs = new ArrayList<>();
      for (int i = 0; i < 12; i++) {
        GenerationRequest r = GenerationRequest.chat("m" + i, "Item " + i, 300)
            .withSampling(i % 2 == 0 ? SamplingParams.GREEDY : new SamplingParams(1.0, 1.0, i));
        rs.add(switch (i % 3) {
          case 0 -> r.withJsonSchema(a);
          case 1 -> r.withJsonSchema(b);
          default -> r.withMaxNewTokens(12);
        });
      }
      List<GenerationResult> out = e.generate(rs);
      assertTrue(e.counters().peakBatch() > 1, "the rows decoded together");
      for (int i = 0; i < rs.size(); i++) {
        GenerationResult r = out.get(i);
        switch (i % 3) {
          case 0 -> assertValid(nested, r, "nested " + i);
          case 1 -> assertValid(small, r, "small " + i);
          default -> assertEquals(e.generate(rs.get(i)).text(), r.text(), "a free row batched with schema rows");
        }
      }
    }
  }

  @Test
  void maxNewTokensCutsTheDocumentWithLength() {
    try (Engine e = open("src/test/resources/models/llama-gqa")) {
      GenerationResult r = e.generate(rows(1, OutputSchema.parse(NESTED), 5).get(0));
      assertEquals(FinishReason.LENGTH, r.finishReason());
      assertEquals(5, r.tokenIds().length);
      assertTrue(r.text().strip().isEmpty() || r.text().strip().startsWith("{"), r.text());
    }
  }
}
