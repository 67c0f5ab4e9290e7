package io.longsieve.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The greedy pick under a KL budget, the policy it measures, and what layers=auto says without a profile. */
class SparseLayerProfileTest {

  @Test
  void layersGoInOrderOfTheirOwnKlWhileTheMeasuredSetStaysWithinTheBudget() {
    double[] single = {0.5, 0.01, 0.02, 0.003};
    List<String> measured = new ArrayList<>();
    SparseLayerProfile.Choice c = SparseLayerProfile.choose(single, 0.03, mask -> {
      double s = 0;
      for (int l = 0; l < mask.length; l++) if (mask[l]) s += single[l];
      measured.add(LayerList.format(mask));
      return 1.2 * s; // layers hurt more together than alone
    });
    assertEquals(List.of(1, 3), c.layers());
    assertEquals(1.2 * 0.013, c.kl(), 1e-12);
    assertEquals(List.of("1/3", "1-3"), measured, "3 alone is not measured again; 0 is over the budget alone");
    assertEquals(4, c.steps().size());
    assertTrue(c.steps().get(0).kept() && c.steps().get(1).kept() && !c.steps().get(2).kept() && !c.steps().get(3).kept());
    assertEquals(List.of(), SparseLayerProfile.choose(single, 0.001, m -> 0).layers());
  }

  @Test
  void theMeasuredPolicyKeepsItsSettingsWithTheLayersReplaced() {
    PolicySpec p = SparseLayerProfile.withLayers(PolicySpec.parse("tsa:tau=0.01 + selkv"), new boolean[] {false, true, true, false, true});
    assertEquals("tsa:tau=0.01,min=1024,window=128,pool=7,layers=1-2/4,keep=0.0", p.prefill().canonical());
    assertEquals("selkv", p.kv().name());
    assertThrows(IllegalArgumentException.class, () -> SparseLayerProfile.withLayers(PolicySpec.parse("tokenselect"),
        new boolean[] {true}));
  }

  @Test
  void anUnprofiledAutoSaysSo(@org.junit.jupiter.api.io.TempDir Path tmp) {
    assertEquals("auto-unprofiled(3-5)", LayerList.describe("auto", "3-5", tmp));
    assertEquals("auto-unprofiled(3-5)", LayerList.describe("auto", "3-5", null));
    assertEquals("all(0-5)", LayerList.describe("all", "0-5", tmp));
    assertEquals("tsa:tau=0.005,min=1024,window=128,pool=7,layers=auto-unprofiled(3-5),keep=0.0 + none + dense",
        PolicySpec.parse("tsa").resolved(LayerList.describe("auto", "3-5", tmp)));
  }
}
