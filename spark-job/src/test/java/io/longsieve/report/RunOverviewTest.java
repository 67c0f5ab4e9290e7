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

  @Test
  void theAuditSectionShowsFidelityBesideAgreementAndOlderManifestsSayNA() {
    Map<String, Object> audit = new java.util.LinkedHashMap<>(Map.of("fraction", 0.5, "seed", 3, "policy", "tokenselect",
        "documents", 4, "compared", 4, "exact_match_rate", 0.75, "agreement_token_f1", 0.9));
    String older = RunOverview.audit(new ManifestFields(Map.of("audit", audit)));
    assertTrue(older.contains("90.0%") && older.contains("mean KL(dense ‖ policy) per token, nats</div>")
        && older.contains(">n/a<"), older);
    audit.putAll(Map.of("kl_mean", 0.0123456, "kl_max", 0.5, "top1_agreement", 0.875));
    String h = RunOverview.audit(new ManifestFields(Map.of("audit", audit)));
    assertTrue(h.contains(">0.0123<") && h.contains(">0.5000<") && h.contains("87.5%"), h);
    assertTrue(h.contains("teacher forcing"), h);
  }
}
