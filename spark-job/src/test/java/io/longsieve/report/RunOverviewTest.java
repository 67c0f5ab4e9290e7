package io.longsieve.report;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.Test;

/** The report's header says how the run prompted and sampled, from the manifest's options. */
class RunOverviewTest {

  private static String header(Map<String, Object> options) {
    return RunOverview.header(new ManifestFields(Map.of("model", "m", "input", "in.jsonl", "backend", "cpu",
        "options", options)));
  }

  @Test
  void aSampledRunWithATemplateSaysSo() {
    String h = header(Map.of("spark.longsieve.policy", "dense", "spark.longsieve.temperature", "0.7",
        "spark.longsieve.topP", "0.9", "spark.longsieve.seed", "5", "spark.longsieve.promptTemplate", "Q: {question} <b>"));
    assertTrue(h.contains("<b>prompt</b> run template Q: {question} &lt;b&gt;"), h);
    assertTrue(h.contains("<b>sampling</b> temperature 0.7, top_p 0.9, seed 5 (rows may set their own"), h);
  }

  @Test
  void aGreedyRunOnThePresetsSaysSoAndAnOlderManifestSaysNothing() {
    String h = header(Map.of("spark.longsieve.policy", "dense", "spark.longsieve.temperature", "0.0"));
    assertTrue(h.contains("<b>prompt</b> task presets") && h.contains("<b>sampling</b> greedy"), h);
    assertFalse(header(Map.of("spark.longsieve.policy", "dense")).contains("sampling"), "not recorded before #21");
  }
}
