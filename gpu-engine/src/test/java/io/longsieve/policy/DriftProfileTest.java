package io.longsieve.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import org.junit.jupiter.api.Test;

/** Drift per layer and the δ-quantile rule of the official profile. */
class DriftProfileTest {

  @Test
  void driftIsTheMeanRelativeChangeOfTheResidualStream() {
    DriftProfile p = new DriftProfile(2);
    float[] in = {3, 4, 1, 0}, out = {3, 4, 1, 1}; // token 0 unchanged, token 1 moves by |(0,1)| = 1 from |(1,0)| = 1
    p.accumulate(1, in, out, 2, 2);
    assertEquals(0.5, p.drift()[1], 1e-7);
    assertEquals(Double.NaN, p.drift()[0]);
  }

  @Test
  void layersAtOrBelowTheQuantileAreSparse() {
    double[] drift = {0.9, 0.2, 0.4, 0.1, 0.3, 0.8};
    assertEquals(0.35, DriftProfile.quantile(drift, 0.5), 1e-12); // torch.quantile: between 0.3 and 0.4
    assertEquals(List.of(1, 3, 4), DriftProfile.sparseLayers(drift, 0.5));
    assertEquals(List.of(0, 1, 2, 3, 4, 5), DriftProfile.sparseLayers(drift, 1.0));
    assertEquals(List.of(3), DriftProfile.sparseLayers(drift, 0.0));
  }
}
