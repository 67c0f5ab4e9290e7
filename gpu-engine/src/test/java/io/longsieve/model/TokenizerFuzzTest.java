package io.longsieve.model;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Mutated tokenizer.json and tokenizer_config.json, from a test model's valid ones: truncated,
 * bytes flipped, fields removed or of the wrong type. Each loads (and then encodes, decodes and
 * renders a probe) or is refused with a CheckpointException naming the file; see {@link FuzzCases}.
 */
class TokenizerFuzzTest {

  private static final Path MODEL = Path.of("src/test/resources/models/llama-bf16");
  private static final ObjectMapper JSON = new ObjectMapper();

  @TempDir Path dir;

  /** The valid file's bytes, mutated one of three ways. */
  private static byte[] mutated(byte[] valid, Random r) throws Exception {
    switch (r.nextInt(3)) {
      case 0:
        return Arrays.copyOf(valid, r.nextInt(valid.length));
      case 1: {
        byte[] b = valid.clone();
        FuzzCases.flipBits(b, 0, b.length, 1 + r.nextInt(6), r);
        return b;
      }
      default: {
        JsonNode root = JSON.readTree(valid);
        JsonMutator.mutate(root, 1 + r.nextInt(3), r);
        return JSON.writeValueAsString(root).getBytes(StandardCharsets.UTF_8);
      }
    }
  }

  @Test
  void mutatedTokenizerJsonLoadsOrIsRefused() throws Exception {
    byte[] valid = Files.readAllBytes(MODEL.resolve("tokenizer.json"));
    FuzzCases.run("tokenizer.json", 60, Duration.ofSeconds(10), (seed, r) -> {
      Path model = Files.createDirectories(dir.resolve("tok-" + seed));
      Files.write(model.resolve("tokenizer.json"), mutated(valid, r));
      try (Tokenizer t = Tokenizer.load(model)) {
        int[] ids = t.encode("The cat sat on the mat. {{ x }} \u00e9\u4e2d", true);
        t.decode(ids, true);
      }
    });
  }

  @Test
  void mutatedTokenizerConfigLoadsOrIsRefused() throws Exception {
    byte[] valid = Files.readAllBytes(MODEL.resolve("tokenizer_config.json"));
    FuzzCases.run("tokenizer_config.json", 300, Duration.ofSeconds(10), (seed, r) -> {
      Path model = Files.createDirectories(dir.resolve("cfg-" + seed));
      Files.write(model.resolve("tokenizer_config.json"), mutated(valid, r));
      ChatTemplate t = ChatTemplate.load(model);
      t.render(r.nextBoolean() ? "Be brief." : null, "Summarise: {% for i in range(9) %}{{ i }}{% endfor %}");
    });
  }
}
