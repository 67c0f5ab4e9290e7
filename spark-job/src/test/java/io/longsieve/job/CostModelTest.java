package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
    assertEquals(b, ts.decodeKeys(p), 0, "tokenselect alone fills prefill and decode");
  }

  @Test
  void composedPolicyPricesEachSlot() {
    AttentionBudget tsa = AttentionBudget.of("tsa + selkv:ratio=0.25 + dense");
    assertEquals(1.0, tsa.attentionBudgetFraction(1000), 0, "below TSA's min + window threshold");
    assertEquals(0.5 + 0.5 * 0.25, tsa.attentionBudgetFraction(50_000), 1e-12, "half the layers keep half the tokens");
    assertEquals(0.25 * 40_000, tsa.decodeKeys(40_000), 1e-9);
    AttentionBudget decodeOnly = AttentionBudget.of("decode=tokenselect:k=1024");
    assertEquals(1.0, decodeOnly.attentionBudgetFraction(50_000), 0, "dense prefill");
    assertEquals(128 + 1024 + 512, decodeOnly.decodeKeys(50_000), 0);
    assertEquals(1.0, AttentionBudget.of("no-such-policy").attentionBudgetFraction(50_000), 0,
        "what does not parse is priced as dense");
  }

  @Test
  void sparsePolicyMakesA128kDocumentCheaperAndOutputTokensCost() {
    double dense = CostModel.defaults((String) null).cost(131_072, 256);
    double tsa = CostModel.defaults("tsa + selkv:ratio=0.25 + tokenselect:k=2048").cost(131_072, 256);
    double tokenSelect = CostModel.defaults("tokenselect").cost(131_072, 256);
    assertTrue(tsa < 0.75 * dense, "TSA prefill: " + tsa + " vs " + dense);
    assertTrue(tokenSelect < dense / 2, "TokenSelect prefill and decode: " + tokenSelect + " vs " + dense);
    assertTrue(CostModel.defaults((String) null).cost(1000, 512) > CostModel.defaults((String) null).cost(1000, 0) + 512 * 40 - 1);
  }

  @Test
  void tokensFromCharacters() {
    assertEquals(250, CostModel.estimateTokens(1000, 4.0));
    assertEquals(1, CostModel.estimateTokens(0, 4.0));
  }
}
