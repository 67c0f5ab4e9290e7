package io.longsieve.policy;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.model.ModelConfig;
import io.longsieve.model.RopeScaling;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Every policy parameter is checked against its range when the policy is parsed (PolicyCatalog
 * says why each range is what it is), and against the model's size by PolicySpec.checkAgainst,
 * so a run with a meaningless number fails before any work, in one line.
 */
class PolicyRangesTest {

  private static String refusal(String policy) {
    return assertThrows(IllegalArgumentException.class, () -> PolicySpec.parse(policy), policy).getMessage();
  }

  @ParameterizedTest(name = "{0} is refused: {1}")
  @CsvSource(delimiter = '|', value = {
      "tokenselect:k=0               | k=0 must be >= 1",
      "tokenselect:chunk=0           | chunk=0 must be >= 1",
      "tokenselect:sinks=-1          | sinks=-1 must be >= 0",
      "tokenselect:k_frac=1.5        | k_frac=1.5 must be in [0, 1]",
      "tokenselect:threshold=-1e999  | threshold=-1e999 must be in any finite number",
      "tsa:tau=1                     | tau=1 must be in [0, 1)",
      "tsa:tau=-0.1                  | tau=-0.1 must be in [0, 1)",
      "tsa:window=0                  | window=0 must be >= 1",
      "selkv:ratio=0                 | ratio=0 must be in (0, 1]",
      "selkv:window=0                | window=0 must be >= 1",
      "selkv:pool=0                  | pool=0 must be >= 1",
      "selkv:alpha=-1                | alpha=-1 must be in >= 0",
      "selkv:gate=2                  | gate=2 must be in [0, 1]",
      "snapkv:capacity=0             | capacity=0 must be >= 1",
      "snapkv:window=0               | window=0 must be >= 1",
      "h2o:heavy=1.5                 | heavy=1.5 must be in [0, 1]",
      "streaming:recent=0            | recent=0 must be >= 1",
      "quest:page=0                  | page=0 must be >= 1",
      "quest:budget=0                | budget=0 must be >= 1",
      "quest:dense_layers=-2         | dense_layers=-2 must be >= 0"})
  void outOfRangeValuesAreRefused(String policy, String expected) {
    String m = refusal(policy);
    assertTrue(m.contains(expected), m);
    assertEquals(1, m.lines().count(), m);
  }

  @Test
  void parametersThatOnlyFailTogetherAreRefused() {
    assertTrue(refusal("streaming:sinks=0,recent=0").contains("recent=0 must be >= 1"));
    assertTrue(refusal("h2o:heavy=0,recent=0").contains("heavy + recent must be > 0"));
    assertTrue(refusal("tokenselect:score=rope,index=int4").contains("score=rope"));
  }

  @ParameterizedTest(name = "{0} is too large")
  @ValueSource(strings = {"tokenselect:k=99999999999999999999", "tokenselect:k=2147483648", "quest:budget=16777217",
      "streaming:recent=9223372036854775808"})
  void overflowingIntegersAreNamedTooLarge(String policy) {
    String m = refusal(policy);
    assertTrue(m.contains("is too large (at most 16777216)"), m);
  }

  @Test
  void overflowingNumbersAreNamedTooLargeAndOddFormsAreNotNumbers() {
    assertTrue(refusal("selkv:alpha=1e400").contains("alpha=1e400 is too large"));
    assertTrue(refusal("selkv:alpha=infinity").contains("is not a number"));
    assertTrue(refusal("selkv:ratio=nan").contains("is not a number"));
    assertTrue(refusal("selkv:ratio=0x1p-2").contains("is not a number"));
    assertTrue(refusal("tokenselect:k=12abc").contains("is not an integer"));
    assertTrue(refusal("tokenselect:k=1.5").contains("is not an integer"));
    assertTrue(refusal("tsa:layers=3-99999999999999999999").contains("layer 99999999999999999999 is too large (at most 9999)"));
  }

  @Test
  void valuesAtTheEdgesOfTheirRangesAreAccepted() {
    for (String p : new String[] {"tokenselect:sinks=0,k=1,window=0,chunk=1,k_frac=1,threshold=-1",
        "tokenselect:k=16777216", "tsa:tau=0,min=0,pool=0,window=1", "tsa:tau=0.999", "selkv:ratio=1,sinks=0,alpha=0,gate=1",
        "selkv:ratio=1e-6", "snapkv:pool=0,ratio=1,capacity=1", "h2o:heavy=0,recent=0.01", "streaming:sinks=0,recent=1",
        "quest:page=1,budget=1,dense_layers=0", "tokenselect:k=05,threshold=-2", "tokenselect:threshold=1.01"}) {
      assertDoesNotThrow(() -> PolicySpec.parse(p), p);
    }
    assertEquals("5", PolicySpec.parse("tokenselect:k=05").decode().text("k"));
  }

  // ---- against a model: layers it does not have ----

  private static ModelConfig model(int layers) {
    return new ModelConfig("llama", 32, 16, layers, 4, 2, 8, 32, 1e-5, 10000.0, RopeScaling.NONE, 1 << 16,
        false, false, 0, -1, List.of());
  }

  @Test
  void tsaLayersBeyondTheModelAreRefusedNamingLayerAndNumLayers() {
    PolicySpec s = PolicySpec.parse("tsa:layers=99");
    var e = assertThrows(IllegalArgumentException.class, () -> s.checkAgainst(model(6)));
    assertTrue(e.getMessage().contains("layer 99") && e.getMessage().contains("numLayers 6"), e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> PolicySpec.parse("tsa:layers=0/2-6 + tokenselect").checkAgainst(model(6)));
    assertDoesNotThrow(() -> PolicySpec.parse("tsa:layers=0/2-5 + selkv + tokenselect").checkAgainst(model(6)));
    assertDoesNotThrow(() -> PolicySpec.parse("tsa:layers=auto").checkAgainst(model(6)));
    assertDoesNotThrow(() -> PolicySpec.parse("dense").checkAgainst(model(1)));
  }

  @Test
  void questDenseLayersBeyondTheModelAreRefused() {
    var e = assertThrows(IllegalArgumentException.class, () -> PolicySpec.parse("quest:dense_layers=7").checkAgainst(model(6)));
    assertTrue(e.getMessage().contains("dense_layers=7") && e.getMessage().contains("numLayers 6"), e.getMessage());
    assertDoesNotThrow(() -> PolicySpec.parse("quest:dense_layers=6").checkAgainst(model(6)));
  }
}
