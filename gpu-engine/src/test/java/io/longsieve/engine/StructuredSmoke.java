package io.longsieve.engine;

import io.longsieve.bootstrap.Backends;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.SamplingParams;
import io.longsieve.structured.OutputSchema;
import io.longsieve.structured.SchemaOracle;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

class StructuredSmoke {
  public static void main(String[] a) {
    String schema = a.length > 1 ? a[1] : "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":8},\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":120},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\"]},\"maxItems\":3}},\"required\":[\"name\",\"age\"],\"additionalProperties\":false}";
    OutputSchema s = OutputSchema.parse(schema);
    SchemaOracle oracle = new SchemaOracle(schema);
    try (Engine e = Backends.open(EngineSpec.of(Path.of(a[0])).withDevice("cpu").withThreads(2).withMaxBatch(8))) {
      List<GenerationRequest> rs = new ArrayList<>();
      for (int i = 0; i < 16; i++) rs.add(GenerationRequest.chat("r" + i, "Give me JSON " + i, 200).withJsonSchema(s)
          .withSampling(i % 2 == 0 ? SamplingParams.GREEDY : new SamplingParams(1.0, 1, i)));
      for (int rep = 0; rep < 2; rep++) {
      long t0 = System.nanoTime();
      List<GenerationResult> res = e.generate(rs);
      long toks = res.stream().mapToLong(r -> r.tokenIds().length).sum();
      System.out.println("rep " + rep + " " + (System.nanoTime() - t0) / 1e6 + " ms " + toks + " tokens; plain:");
      t0 = System.nanoTime();
      List<GenerationRequest> plain = new ArrayList<>();
      for (GenerationRequest r : rs) plain.add(r.withJsonSchema(null).withMinNewTokens(1000).withMaxNewTokens(70));
      res = e.generate(plain);
      toks = res.stream().mapToLong(r -> r.tokenIds().length).sum();
      System.out.println("plain " + (System.nanoTime() - t0) / 1e6 + " ms " + toks + " tokens");
      }
      if (true) return;
      for (GenerationResult r : e.generate(rs)) System.out.println(r.finishReason() + " " + r.tokenIds().length + " " + oracle.valid(r.text()) + " " + r.text());
      System.out.println((System.nanoTime()) / 1e6 + " ms");
    }
  }
}
