package io.longsieve.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.longsieve.bootstrap.Backends;
import io.longsieve.engine.Engine;
import io.longsieve.engine.FinishReason;
import io.longsieve.engine.GenerationRequest;
import io.longsieve.engine.GenerationResult;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.SamplingParams;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code longsieve generate}'s benchmark options on the CPU backend and the tiny llama-gqa
 * checkpoint: exact prompt ids (--prompt-ids, the same generation as the tokenized raw prompt),
 * EOS ignored up to a count (--min-new-tokens / --ignore-eos), several prompts and counts per
 * engine, and one JSON line of timings per run (--stats-json).
 */
class GenerateCommandTest {

  static final Path MODEL = Path.of("src/test/resources/models/llama-gqa");
  static final String TEXT = "The cat sat on the mat and the river ran north past the market.";

  static Engine cpu() {
    return Backends.open(EngineSpec.of(MODEL).withDevice("cpu").withThreads(2));
  }

  static Path idsFile(Path dir, String name, int[] ids) throws Exception {
    Path f = dir.resolve(name);
    Files.writeString(f, Arrays.stream(ids).mapToObj(Integer::toString).collect(Collectors.joining(" ")) + "\n");
    return f;
  }

  @Test
  void promptIdsGenerateWhatTheTokenizedRawPromptDoes() {
    try (Engine e = cpu()) {
      GenerationResult text = e.generate(GenerationRequest.raw("t", TEXT, 12));
      int[] ids = e.model().tokenizer().encode(TEXT, true);
      GenerationResult byIds = e.generate(GenerationRequest.raw("i", "", 12).withPromptIds(ids));
      assertEquals(ids.length, byIds.stats().inputTokens());
      assertArrayEquals(text.tokenIds(), byIds.tokenIds());
      // the ids are taken as given: no BOS is added in front of them
      int[] noBos = Arrays.copyOfRange(ids, 1, ids.length);
      assertEquals(noBos.length, e.generate(GenerationRequest.raw("n", "", 1).withPromptIds(noBos)).stats().inputTokens());
    }
  }

  @Test
  void promptIdsOutsideTheVocabularyAreRefused() {
    try (Engine e = cpu()) {
      int vocab = e.model().config().vocabSize();
      assertThrows(IllegalArgumentException.class,
          () -> e.generate(GenerationRequest.raw("v", "", 2).withPromptIds(new int[] {1, vocab})));
      assertThrows(IllegalArgumentException.class,
          () -> e.generate(GenerationRequest.raw("v", "", 2).withPromptIds(new int[] {-1})));
    }
    assertThrows(IllegalArgumentException.class, () -> GenerationRequest.raw("m", "x", 2).withMinNewTokens(-1));
  }

  @Test
  void minNewTokensGoesOnPastEos() {
    try (Engine e = cpu()) {
      // near-uniform sampling over 1024 ids reaches one of the two EOS ids within a few hundred tokens
      GenerationRequest base = GenerationRequest.raw("s", TEXT, 1500).withSampling(new SamplingParams(50, 1, 0));
      GenerationResult stopped = null;
      for (long seed = 0; seed < 20 && stopped == null; seed++) {
        GenerationResult r = e.generate(base.withSampling(new SamplingParams(50, 1, seed)));
        if (r.finishReason() == FinishReason.EOS && r.tokenIds().length < 1000) {
          stopped = r;
          base = base.withSampling(new SamplingParams(50, 1, seed));
        }
      }
      assertTrue(stopped != null, "no seed ended on EOS");
      int n = stopped.tokenIds().length;
      assertTrue(e.model().eosIds().contains(stopped.tokenIds()[n - 1]));
      GenerationResult longer = e.generate(base.withMinNewTokens(n + 20));
      assertTrue(longer.tokenIds().length >= n + 20, "went on past EOS: " + longer.tokenIds().length);
      assertArrayEquals(stopped.tokenIds(), Arrays.copyOf(longer.tokenIds(), n), "same draws up to the EOS");
      GenerationResult exact = e.generate(base.withMaxNewTokens(n + 5).withMinNewTokens(n + 5));
      assertEquals(n + 5, exact.tokenIds().length);
      assertEquals(FinishReason.LENGTH, exact.finishReason());
    }
  }

  @Test
  void commandRunsEveryPromptAtEveryCountAndWritesJsonLines(@TempDir Path tmp) throws Exception {
    int[] a, b;
    try (Engine e = cpu()) {
      a = e.model().tokenizer().encode(TEXT, true);
      b = e.model().tokenizer().encode("Rivers run north past the market while the engine reports quietly.", true);
    }
    Path fa = idsFile(tmp, "a.ids", a), fb = idsFile(tmp, "b.ids", b), json = tmp.resolve("out/stats.jsonl");
    int rc = EngineCli.commandLine().execute("generate", "--model", MODEL.toString(), "--prompt-ids", fa.toString(),
        "--prompt-ids", fb.toString(), "--max-new-tokens", "3,7", "--ignore-eos", "--device", "cpu", "--threads", "2",
        "--prefill-chunk", "8", "--warmup-tokens", "5", "--stats-json", json.toString(),
        "--policy", "tsa:keep=0.25,min=4,window=4,layers=all");
    assertEquals(0, rc);
    List<String> lines = Files.readAllLines(json);
    assertEquals(4, lines.size(), String.join("\n", lines));
    ObjectMapper m = new ObjectMapper();
    int[][] expected = {{a.length, 3}, {a.length, 7}, {b.length, 3}, {b.length, 7}};
    for (int i = 0; i < 4; i++) {
      JsonNode o = m.readTree(lines.get(i));
      assertEquals(expected[i][0], o.path("input_tokens").asInt(), lines.get(i));
      assertEquals(expected[i][1], o.path("output_tokens").asInt(), lines.get(i));
      assertEquals(expected[i][1], o.path("max_new_tokens").asInt());
      assertEquals("length", o.path("finish").asText());
      assertEquals("cpu", o.path("backend").asText());
      assertTrue(o.path("policy").asText().startsWith("tsa:") && o.path("policy").asText().contains("keep=0.25"));
      double prefill = o.path("prefill_ms").asDouble(), total = o.path("total_ms").asDouble();
      assertTrue(prefill > 0 && total >= prefill, lines.get(i));
      assertEquals(o.path("decode_ms").asDouble() / (expected[i][1] - 1), o.path("decode_ms_per_token").asDouble(), 1e-9);
      assertTrue(o.path("prompt_ids").asText().endsWith(i < 2 ? "a.ids" : "b.ids"));
    }
  }

  @Test
  void commandTakesAJsonSchemaAndRefusesOneOutsideTheSubset(@TempDir Path tmp) throws Exception {
    Path good = tmp.resolve("good.json"), bad = tmp.resolve("bad.json");
    Files.writeString(good, "{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9},\"maxItems\":3}");
    Files.writeString(bad, "{\"type\":\"string\",\"format\":\"uri\"}");
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream(), err = new java.io.ByteArrayOutputStream();
    java.io.PrintStream stdout = System.out, stderr = System.err;
    try {
      System.setOut(new java.io.PrintStream(out, true, java.nio.charset.StandardCharsets.UTF_8));
      System.setErr(new java.io.PrintStream(err, true, java.nio.charset.StandardCharsets.UTF_8));
      assertEquals(0, EngineCli.commandLine().execute("generate", "--model", MODEL.toString(), "--prompt", "Digits:",
          "--json-schema", good.toString(), "--max-new-tokens", "80", "--device", "cpu"));
      assertEquals(2, EngineCli.commandLine().execute("generate", "--model", MODEL.toString(), "--prompt", "x",
          "--json-schema", bad.toString(), "--device", "cpu"));
    } finally {
      System.setOut(stdout);
      System.setErr(stderr);
    }
    String text = out.toString(java.nio.charset.StandardCharsets.UTF_8).strip();
    assertTrue(new io.longsieve.structured.SchemaOracle(Files.readString(good)).valid(text), text);
    String message = err.toString(java.nio.charset.StandardCharsets.UTF_8);
    assertTrue(message.lines().anyMatch(l -> l.startsWith("generate: --json-schema " + bad) && l.contains("'format'")), message);
  }

  @Test
  void commandRefusesBadInput(@TempDir Path tmp) throws Exception {
    Path bad = tmp.resolve("bad.ids");
    Files.writeString(bad, "1 2 three 4");
    assertNotEquals(0, EngineCli.commandLine().execute("generate", "--model", MODEL.toString(), "--prompt-ids",
        bad.toString(), "--device", "cpu"));
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> GenerateCommand.readIds(bad));
    assertTrue(e.getMessage().contains("'three'"), e.getMessage());
    // neither or both of --prompt and --prompt-ids
    assertEquals(2, EngineCli.commandLine().execute("generate", "--model", MODEL.toString(), "--device", "cpu"));
    assertEquals(2, EngineCli.commandLine().execute("generate", "--model", MODEL.toString(), "--prompt", "x",
        "--prompt-ids", bad.toString(), "--device", "cpu"));
    Path good = idsFile(tmp, "good.ids", new int[] {5, 6, 7});
    assertArrayEquals(new int[] {5, 6, 7}, GenerateCommand.readIds(good));
  }

  @Test
  void aQuantizationMethodTheEngineDoesNotReadIsRefusedInOneLine(@TempDir Path tmp) throws Exception {
    Path model = Files.createDirectories(tmp.resolve("gptq"));
    try (var files = Files.list(MODEL)) {
      for (Path f : files.toList()) Files.copy(f, model.resolve(f.getFileName()));
    }
    ObjectMapper json = new ObjectMapper();
    var config = (com.fasterxml.jackson.databind.node.ObjectNode) json.readTree(model.resolve("config.json").toFile());
    config.putObject("quantization_config").put("quant_method", "gptq").put("bits", 4);
    json.writeValue(model.resolve("config.json").toFile(), config);
    java.io.StringWriter err = new java.io.StringWriter();
    picocli.CommandLine cl = EngineCli.commandLine();
    cl.setErr(new java.io.PrintWriter(err, true));
    assertEquals(2, cl.execute("generate", "--model", model.toString(), "--prompt", "x", "--device", "cpu"));
    assertEquals(1, err.toString().strip().lines().count(), err.toString());
    assertTrue(err.toString().contains("quantization_config: quant_method 'gptq' is not supported"), err.toString());
  }
}
