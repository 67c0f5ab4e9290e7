package io.longsieve.eval;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.longsieve.cpu.CpuRunner;
import io.longsieve.engine.Goldens;
import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.engine.spi.Sampler;
import io.longsieve.model.Checkpoint;
import io.longsieve.policy.PolicySpec;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * The trained longsieve-needle model (models/longsieve-needle-7m, bf16 weights) on the CPU engine
 * against transformers' goldens (fp32 eager CPU, written by tools/train/train_needle.py): the same
 * chat rendering and token ids for suite documents, the last-position logits, and the greedy
 * tokens while transformers' top-2 margin is clear. Skipped where the model folder is absent.
 */
class NeedleModelParityTest {

  static final Path MODEL = Path.of("../models/longsieve-needle-7m");

  @Test
  void cpuEngineMatchesTransformers() throws Exception {
    assumeTrue(Files.isRegularFile(MODEL.resolve("goldens.json")), "no trained model at " + MODEL);
    JsonNode gold = new ObjectMapper().readTree(MODEL.resolve("goldens.json").toFile());
    TaskPrompts prompts = TaskPrompts.standard();
    try (LoadedModel model = LoadedModel.load(MODEL); Checkpoint ck = Checkpoint.open(MODEL);
         CpuRunner runner = new CpuRunner(model.config(), ck, 2, 256)) {
      int vocab = model.config().vocabSize();
      for (JsonNode c : gold.get("cases")) {
        String id = c.get("id").asText();
        SuiteItem item = SuiteJsonl.fromJson(c.get("item"), 1);
        String user = prompts.userMessage(item);
        assertEquals(c.get("user_message").asText(), user, id + ": Java builds the training code's user message");
        String rendered = model.chatTemplate().render(null, user);
        assertEquals(c.get("chat_prompt").asText(), rendered, id + ": Jinjava renders what apply_chat_template rendered");
        int[] ids = model.tokenizer().encode(rendered, false);
        assertArrayEquals(Goldens.ints(c.get("input_ids")), ids, id + ": token ids");

        float[] logits = new float[vocab];
        float[] want = Goldens.floats(c.get("logits_last"));
        int[] greedy = Goldens.ints(c.get("greedy_ids"));
        double[] margins = doubles(c.get("greedy_margins"));
        try (ModelRunner.Sequence seq = runner.open(ids.length + greedy.length + 1, PolicySpec.DENSE)) {
          seq.prefill(ids, logits);
          double scale = 0, maxDiff = 0;
          for (int v = 0; v < vocab; v++) {
            scale = Math.max(scale, Math.abs(want[v]));
            maxDiff = Math.max(maxDiff, Math.abs(want[v] - logits[v]));
          }
          assertTrue(maxDiff <= 1e-4 * Math.max(1, scale) + 1e-4, id + ": last logits differ by " + maxDiff + " (max |logit| " + scale + ")");
          int pos = ids.length;
          for (int step = 0; step < greedy.length && margins[step] > 1e-3; step++) {
            int next = Sampler.argmax(logits, logits.length);
            assertEquals(greedy[step], next, id + ": greedy step " + step);
            seq.decode(next, pos++, logits);
          }
        }
      }
    }
  }

  static double[] doubles(JsonNode a) {
    double[] out = new double[a.size()];
    for (int i = 0; i < out.length; i++) out[i] = a.get(i).asDouble();
    return out;
  }
}
