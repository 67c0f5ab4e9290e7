package io.longsieve.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.longsieve.bootstrap.Backends;
import io.longsieve.engine.Engine;
import io.longsieve.engine.GenerationRequest;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.SamplingParams;
import io.longsieve.policy.LayerList;
import io.longsieve.policy.PolicySpec;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code longsieve profile} writes the sparse-layer file that {@code tsa:layers=auto} then uses. */
class ProfileCommandTest {

  static final Path MODEL = Path.of("src/test/resources/models/llama-gqa");

  @Test
  void profileWritesTheLayerListAndTsaReadsIt(@TempDir Path tmp) throws Exception {
    Path model = tmp.resolve("model");
    Files.createDirectories(model);
    try (var files = Files.list(MODEL)) {
      for (Path f : (Iterable<Path>) files::iterator) Files.copy(f, model.resolve(f.getFileName()));
    }
    Path text = tmp.resolve("calibration.txt");
    Files.writeString(text, "The best thing to do in San Francisco is eat a sandwich and sit in Dolores Park. "
        + "Rivers run north past the market while the engine reports quietly. ");
    int rc = EngineCli.commandLine().execute("profile", "--model", model.toString(), "--calibration", text.toString(),
        "--tokens", "200", "--threads", "2", "--delta", "0.5");
    assertEquals(0, rc);
    Path file = model.resolve(LayerList.FILE_NAME);
    JsonNode root = new ObjectMapper().readTree(file.toFile());
    assertEquals(200, root.path("calibration_tokens").asInt());
    assertEquals(4, root.path("drift").size());
    List<Integer> layers = LayerList.read(file);
    assertEquals(2, layers.size()); // δ = 0.5 over 4 layers with distinct drifts: the lower half
    for (JsonNode d : root.path("drift")) assertTrue(d.asDouble() > 0);

    try (Engine e = Backends.open(EngineSpec.of(model).withDevice("cpu").withThreads(2))) {
      var r = e.generate(new GenerationRequest("p", "hello river", null, true, 2, SamplingParams.GREEDY, List.of(),
          PolicySpec.parse("tsa")));
      String expected = layers.get(0) + (layers.get(1) == layers.get(0) + 1 ? "-" : "/") + layers.get(1);
      assertTrue(r.stats().policyResolved().contains("layers=auto(" + expected + ")"), r.stats().policyResolved());
      assertEquals(PolicySpec.parse("tsa").canonical(), r.stats().policy()); // canonical: as asked
    }
    assertEquals("tsa:tau=0.005,min=1024,window=128,pool=7,layers=auto,keep=0.0,chunk=4096 + none + dense",
        PolicySpec.parse("tsa").canonical());
  }
}
