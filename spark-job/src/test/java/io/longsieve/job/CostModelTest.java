package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The driver's per-document cost estimate and the policy budgets behind it. */
class CostModelTest {

  @Test
  void denseAttentionMakesLongDocumentsSuperlinear() {
    CostModel dense = CostModel.defaults("dense");
    double c8k = dense.cost(8192, 0), c128k = dense.cost(131_072, 0);
    assertTrue(c128k / c8k > 16 * 2, "128K should cost well over 16 × 8K under dense attention: " + c128k / c8k);
  }

  @Test
  void tokenSelectBudgetIsTheExactShareOfTheCausalTriangle() {
    AttentionBudget ts = AttentionBudget.of("tokenselect:k=2048");
    int b = 2048 + 128 + 512;
    assertEquals(1.0, ts.attentionBudgetFraction(b), 0);
    // query i attends min(i, B) keys: B·P − B²/2 pairs of P²/2
    int p = 100_000;
    double expected = ((double) b * p - (double) b * b / 2) / ((double) p * p / 2);
    assertEquals(expected, ts.attentionBudgetFraction(p), 1e-12);
    assertEquals(b, ts.decodeKeys(p), 0);
  }

  @Test
  void composedPolicyPricesEachPhase() {
    AttentionBudget tsa = AttentionBudget.of("tsa:keep=0.4 + selkv:ratio=0.25 + dense");
    assertEquals(1.0, tsa.attentionBudgetFraction(1000), 0, "below TSA's 1152-token threshold");
    assertEquals(0.5 + 0.5 * 0.16, tsa.attentionBudgetFraction(50_000), 1e-12);
    assertEquals(0.25 * 40_000, tsa.decodeKeys(40_000), 1e-9);
    assertEquals(1.0, AttentionBudget.of("some-future-policy").attentionBudgetFraction(50_000), 0,
        "unknown policies are priced as dense");
    assertThrows(IllegalArgumentException.class, () -> AttentionBudget.of("selkv:ratio=2"));
  }

  @Test
  void sparsePolicyMakesA128kDocumentCheaperAndOutputTokensCost() {
    double dense = CostModel.defaults(null).cost(131_072, 256);
    double sparse = CostModel.defaults("tsa + selkv:ratio=0.25 + tokenselect:k=2048").cost(131_072, 256);
    assertTrue(sparse < dense / 2, sparse + " vs " + dense);
    assertTrue(CostModel.defaults(null).cost(1000, 512) > CostModel.defaults(null).cost(1000, 0) + 512 * 40 - 1);
  }

  @Test
  void tokensFromCharacters() {
    assertEquals(250, CostModel.estimateTokens(1000, 4.0));
    assertEquals(1, CostModel.estimateTokens(0, 4.0));
  }
}
