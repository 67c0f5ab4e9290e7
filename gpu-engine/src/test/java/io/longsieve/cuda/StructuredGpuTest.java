package io.longsieve.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.bootstrap.Backends;
import io.longsieve.engine.Engine;
import io.longsieve.engine.FinishReason;
import io.longsieve.engine.GenerationRequest;
import io.longsieve.engine.GenerationResult;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.SamplingParams;
import io.longsieve.policy.PolicySpec;
import io.longsieve.structured.OutputSchema;
import io.longsieve.structured.SchemaOracle;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Constrained decoding on the CUDA backend: rows with and without a JSON schema decode together
 * through the batched step (its CUDA graphs on, and off for the eager path), greedy and at
 * temperature 1.0, dense and TokenSelect (captured in the graph) and SelKV (the eager batched path);
 * every closed document validates (networknt) and the unconstrained rows are what they are alone.
 */
@Tag("gpu")
class StructuredGpuTest {

  static final String SCHEMA = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":6},"
      + "\"n\":{\"type\":\"integer\",\"minimum\":-5,\"maximum\":500},\"tags\":{\"type\":\"array\",\"items\":"
      + "{\"enum\":[\"red\",\"green\"]},\"maxItems\":3},\"ok\":{\"type\":\"boolean\"}},\"required\":[\"name\",\"n\",\"ok\"],"
      + "\"additionalProperties\":false}";

  @ParameterizedTest
  @ValueSource(strings = {"dense", "tokenselect:k=16,sinks=2,window=4", "selkv:ratio=0.5"})
  void schemaRowsValidateBesideFreeRows(String policy) {
    SchemaOracle oracle = new SchemaOracle(SCHEMA);
    OutputSchema schema = OutputSchema.parse(SCHEMA);
    for (boolean graphs : new boolean[] {true, false}) {
      System.setProperty("longsieve.decodeGraphs", Boolean.toString(graphs));
      try (Engine e = Backends.open(EngineSpec.of(Path.of("src/test/resources/models/llama-gqa")).withDevice("cuda")
          .withMaxBatch(8))) {
        List<GenerationRequest> rs = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
          GenerationRequest r = GenerationRequest.raw("r" + i, "Row " + i + " of the table:", 160)
              .withSampling(i % 3 == 0 ? SamplingParams.GREEDY : new SamplingParams(1.0, 1.0, i))
              .withPolicy(PolicySpec.parse(policy));
          rs.add(i % 4 == 3 ? r.withMaxNewTokens(24) : r.withJsonSchema(schema));
        }
        List<GenerationResult> out = e.generate(rs);
        for (int i = 0; i < rs.size(); i++) {
          GenerationResult r = out.get(i);
          if (rs.get(i).jsonSchema() == null) {
            assertEquals(e.generate(rs.get(i)).text(), r.text(), "free row " + i + " batched vs alone");
            continue;
          }
          assertEquals(FinishReason.JSON_COMPLETE, r.finishReason(), "row " + i + ": " + r.text());
          assertTrue(oracle.valid(r.text()), "row " + i + " (" + policy + ", graphs " + graphs + "): " + r.text());
        }
      } finally {
        System.clearProperty("longsieve.decodeGraphs");
      }
    }
  }
}
