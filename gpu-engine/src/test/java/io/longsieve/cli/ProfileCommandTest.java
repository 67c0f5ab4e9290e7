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
        "--tokens", "200", "--threads", "2", "--method", "drift", "--delta", "0.5");
    assertEquals(0, rc);
    Path file = model.resolve(LayerList.FILE_NAME);
    JsonNode root = new ObjectMapper().readTree(file.toFile());
    assertEquals("drift", root.path("method").asText());
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

  static Path copyModel(Path tmp) throws java.io.IOException {
    Path model = tmp.resolve("model");
    Files.createDirectories(model);
    try (var files = Files.list(MODEL)) {
      for (Path f : (Iterable<Path>) files::iterator) Files.copy(f, model.resolve(f.getFileName()));
    }
    return model;
  }

  /**
   * The default method: each layer's own KL against dense at the policy's settings, then the greedy pick
   * under the budget; calibration capped at the model's training length (llama-gqa: original_max_position_embeddings
   * 256 of its llama3 RoPE); tsa:layers=auto then runs the chosen layers and says so in policy_resolved.
   */
  @Test
  void klProfileMeasuresEachLayerAloneAndPicksUnderTheBudget(@TempDir Path tmp) throws Exception {
    Path model = copyModel(tmp);
    Path text = tmp.resolve("calibration.txt");
    Files.writeString(text, "Rivers run north past the market while the engine reports quietly. Seven stones. ");
    String policy = "tsa:tau=0.3,min=16,window=16";
    int rc = EngineCli.commandLine().execute("profile", "--model", model.toString(), "--calibration", text.toString(),
        "--tokens", "4000", "--threads", "2", "--policy", policy, "--new-tokens", "6", "--kl-budget", "0.05");
    assertEquals(0, rc);
    JsonNode root = new ObjectMapper().readTree(model.resolve(LayerList.FILE_NAME).toFile());
    assertEquals("kl", root.path("method").asText());
    assertEquals(256, root.path("calibration_tokens").asInt(), "capped at the training length");
    assertEquals(0.05, root.path("kl_budget").asDouble());
    assertEquals(4, root.path("kl_per_layer").size());
    double worst = 0;
    for (JsonNode k : root.path("kl_per_layer")) {
      assertTrue(k.asDouble() >= 0);
      worst = Math.max(worst, k.asDouble());
    }
    assertTrue(worst > 0, "some layer's sparsity costs KL: " + root.path("kl_per_layer"));
    List<Integer> layers = LayerList.read(model.resolve(LayerList.FILE_NAME));
    for (int l : layers) assertTrue(root.path("kl_per_layer").get(l).asDouble() <= 0.05, "layer " + l);
    assertTrue(root.path("kl_of_chosen").asDouble() <= 0.05);
    try (Engine e = Backends.open(EngineSpec.of(model).withDevice("cpu").withThreads(2))) {
      var r = e.generate(new GenerationRequest("p", "hello river", null, true, 2, SamplingParams.GREEDY, List.of(),
          PolicySpec.parse(policy)));
      boolean[] mask = new boolean[4];
      for (int l : layers) mask[l] = true;
      assertTrue(r.stats().policyResolved().contains("layers=auto(" + LayerList.format(mask) + ")"), r.stats().policyResolved());
    }
  }

  @Test
  void aPolicyThatIsNotTsaIsRefused(@TempDir Path tmp) throws Exception {
    Path text = tmp.resolve("c.txt");
    Files.writeString(text, "some text");
    java.io.StringWriter err = new java.io.StringWriter();
    picocli.CommandLine cli = EngineCli.commandLine();
    cli.setErr(new java.io.PrintWriter(err));
    int rc = cli.execute("profile", "--model", MODEL.toString(), "--calibration", text.toString(), "--policy", "tokenselect",
        "--out", tmp.resolve("x.json").toString());
    assertTrue(rc != 0);
    assertTrue(!Files.exists(tmp.resolve("x.json")));
  }
}
