package io.longsieve.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** {@code inspect} end to end on the tiny fixtures: the report, and the one-line refusal of a folder the engine cannot run. */
class InspectCommandTest {

  private static final Path MODELS = Path.of("src/test/resources/models");

  private record Run(int code, String out, String err) {}

  private static Run inspect(String... args) {
    CommandLine cl = EngineCli.commandLine();
    StringWriter out = new StringWriter(), err = new StringWriter();
    cl.setOut(new PrintWriter(out));
    cl.setErr(new PrintWriter(err));
    String[] all = new String[args.length + 1];
    all[0] = "inspect";
    System.arraycopy(args, 0, all, 1, args.length);
    int code = cl.execute(all);
    return new Run(code, out.toString(), err.toString());
  }

  @Test
  void reportsWhatTheEngineReadsFromGemma3() {
    Run r = inspect("--model", MODELS.resolve("gemma3-text").toString(), "--gpu-memory", "80GiB", "--max-tokens", "4096");
    assertEquals(0, r.code(), r.err());
    String o = r.out();
    assertTrue(o.contains("architecture  Gemma3ForCausalLM (model_type gemma3_text)"), o);
    assertTrue(o.contains("3 with a sliding window of 16, RoPE base 10000, scaling none"), o);
    assertTrue(o.contains("1 with full attention, RoPE base 1000000, scaling linear factor 8"), o);
    assertTrue(o.contains("q/k norm") && o.contains("GeGLU-tanh") && o.contains("logit soft-cap 8"), o);
    assertTrue(o.contains("tensors       all 54 the engine loads are present"), o);   // embed, 4 × 13, final norm; head tied
    assertTrue(o.contains("chat roles    system, user, assistant"), o);
    assertTrue(o.contains("85.90 GB × 0.9"), o);                                       // 80 GiB
    assertTrue(o.contains("device auto   cuda where a GPU is usable"), o);  // verified on an H100, 2026-12-05
  }

  @Test
  void phi3ReportsPartialRotaryAndLongRope() {
    Run r = inspect("--model", MODELS.resolve("phi3-longrope").toString());
    assertEquals(0, r.code(), r.err());
    assertTrue(r.out().contains("scaling longrope original 64 attention 1.155, rotating 12 of 16"), r.out());
    assertTrue(r.out().contains("fused qkv_proj and gate_up_proj"), r.out());
  }

  @Test
  void refusesAFolderMissingTensorsInOneLine(@TempDir Path dir) throws Exception {
    try (Stream<Path> files = Files.list(MODELS.resolve("qwen3-yarn"))) {
      for (Path f : (Iterable<Path>) files::iterator) Files.copy(f, dir.resolve(f.getFileName()));
    }
    ObjectMapper json = new ObjectMapper();
    ObjectNode config = (ObjectNode) json.readTree(dir.resolve("config.json").toFile());
    config.put("num_hidden_layers", 4);  // the checkpoint has three
    config.remove("layer_types");
    Files.writeString(dir.resolve("config.json"), json.writeValueAsString(config));
    Run r = inspect("--model", dir.toString());
    assertEquals(2, r.code());
    assertTrue(r.out().contains("tensors       11 the engine loads are not as it needs them"), r.out());
    assertEquals(1, r.err().strip().lines().count(), r.err());
    assertTrue(r.err().contains("cannot run: tensors 11 missing (first: model.layers.3.input_layernorm.weight: missing)"), r.err());
  }

  @Test
  void refusesABadConfigInOneLine(@TempDir Path dir) throws Exception {
    Files.writeString(dir.resolve("config.json"), "{\"model_type\": \"mamba\"}");
    Run r = inspect("--model", dir.toString());
    assertEquals(2, r.code());
    assertEquals(1, r.err().strip().lines().count(), r.err());
    assertTrue(r.err().contains("model_type 'mamba'"), r.err());
    assertEquals(2, inspect("--model", dir.toString(), "--gpu-memory", "lots").code());
  }

  @Test
  void sizesInBothUnits() {
    assertEquals(141_000_000_000L, InspectCommand.parseBytes("141GB"));
    assertEquals(80L << 30, InspectCommand.parseBytes("80GiB"));
    assertEquals(1_500_000_000L, InspectCommand.parseBytes("1.5 GB"));
    assertEquals(4096L, InspectCommand.parseBytes("4096"));
  }
}
