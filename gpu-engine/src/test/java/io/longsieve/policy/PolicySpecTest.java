package io.longsieve.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.policy.PolicyCatalog.Backend;
import org.junit.jupiter.api.Test;

/** The policy grammar: shorthands, slot order, explicit slots, validation messages, canonical form. */
class PolicySpecTest {

  @Test
  void denseIsTheDefaultAndCanonicallyJustDense() {
    assertEquals("dense", PolicySpec.parse(null).canonical());
    assertEquals("dense", PolicySpec.parse(" Dense ").canonical());
    assertEquals("dense", PolicySpec.parse("dense + none + dense").canonical());
    assertEquals("dense", PolicySpec.compose(null, null, null, null).canonical());
    assertEquals("dense", PolicySpec.compose("dense", "dense", "none", "dense").canonical());
  }

  @Test
  void tokenselectAloneFillsPrefillAndDecode() {
    PolicySpec s = PolicySpec.parse("tokenselect");
    assertEquals("tokenselect", s.prefill().name());
    assertEquals("none", s.kv().name());
    assertEquals("tokenselect", s.decode().name());
    assertEquals("2048", s.decode().text("k"));
    assertTrue(s.canonical().startsWith("tokenselect:sinks=128,k=2048,k_frac=0.0,window=512,chunk=512,heads=layer,"
        + "gqa=div,pool=0,positions=compact,scale=none,cache=off,threshold=0.9,index=full,score=neutral + none + tokenselect:"), s.canonical());
  }

  @Test
  void combinedFormAndSlotOptionsAgree() {
    String combined = PolicySpec.parse("tsa + selkv:ratio=0.25 + tokenselect:k=2048").canonical();
    assertEquals(combined, PolicySpec.compose(null, "tsa", "selkv:ratio=0.25", "tokenselect:k=2048").canonical());
    assertEquals(combined, PolicySpec.compose("dense", "tsa", "selkv:ratio=0.25", "tokenselect:k=2048").canonical());
    assertEquals(combined, PolicySpec.parse("decode=tokenselect:k=2048 + prefill=tsa + kv=selkv").canonical());
    assertEquals(combined, PolicySpec.parse(combined).canonical()); // canonical parses back to itself
    PolicySpec s = PolicySpec.parse(combined);
    assertEquals("tsa", s.prefill().name());
    assertEquals("0.25", s.kv().text("ratio"));
    assertEquals("tokenselect", s.decode().name());
  }

  @Test
  void termsFillSlotsInOrder() {
    PolicySpec s = PolicySpec.parse("tokenselect:k=64 + tokenselect:k=32");
    assertEquals("64", s.prefill().text("k"));
    assertEquals("32", s.decode().text("k"));
    PolicySpec t = PolicySpec.parse("selkv + quest");
    assertEquals("dense", t.prefill().name());
    assertEquals("selkv", t.kv().name());
    assertEquals("quest", t.decode().name());
    PolicySpec st = PolicySpec.parse("streaming:recent=64");
    assertEquals("streaming", st.kv().name());
    assertEquals("64", st.decode().text("recent"));
    assertEquals("snapkv", PolicySpec.parse("snapkv").kv().name());
  }

  @Test
  void slotOptionsReplaceThatSlotOfThePolicy() {
    PolicySpec s = PolicySpec.compose("tokenselect", null, "selkv", null);
    assertEquals("tokenselect", s.prefill().name());
    assertEquals("selkv", s.kv().name());
    assertEquals("tokenselect", s.decode().name());
  }

  @Test
  void errorsNameTheKnownNamesAndKeys() {
    var e = assertThrows(IllegalArgumentException.class, () -> PolicySpec.parse("tokenselct"));
    assertTrue(e.getMessage().contains("known: dense, none, tokenselect, tsa, selkv, snapkv, h2o, streaming, quest"),
        e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> PolicySpec.parse("tokenselect:topk=5"));
    assertTrue(e.getMessage().contains("no parameter 'topk'") && e.getMessage().contains("known: sinks, k, k_frac"),
        e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> PolicySpec.parse("selkv:ratio=2"));
    assertTrue(e.getMessage().contains("(0, 1]"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> PolicySpec.parse("tokenselect:gqa=xor"));
    assertTrue(e.getMessage().contains("div, mod"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> PolicySpec.parse("tokenselect:k=many"));
    assertTrue(e.getMessage().contains("not an integer"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> PolicySpec.compose(null, "selkv", null, null).canonical());
    assertTrue(e.getMessage().contains("prefill policies: dense, tokenselect, tsa"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> PolicySpec.parse("quest + tsa"));
    assertTrue(e.getMessage().contains("no slot left for 'tsa'"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> PolicySpec.parse("kv=quest"));
    assertTrue(e.getMessage().contains("kv policies: none, selkv, snapkv, h2o, streaming"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> PolicySpec.parse("tsa:layers=3-1"));
    assertTrue(e.getMessage().contains("layers must be"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> PolicySpec.parse("dense:k=1"));
    assertTrue(e.getMessage().contains("takes no parameters"), e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> PolicySpec.parse("tsa + + dense"));
    assertThrows(IllegalArgumentException.class, () -> PolicySpec.parse("tokenselect:k=1,k=2"));
  }

  @Test
  void layerListsResolve() {
    assertEquals("2-3", LayerList.format(LayerList.resolve("auto", 4, null)));   // default: second half
    assertEquals("0-3", LayerList.format(LayerList.resolve("all", 4, null)));
    assertEquals("none", LayerList.format(LayerList.resolve("none", 4, null)));
    assertEquals("0/2-3", LayerList.format(LayerList.resolve("0/2-3", 4, null)));
  }

  @Test
  void theResolvedFormFillsInTsaLayersOnly() {
    PolicySpec s = PolicySpec.parse("tsa:layers=2 + quest:dense_layers=2");
    String resolved = s.resolved(LayerList.describe("2", "2", null));
    assertTrue(resolved.contains("layers=2(2)"), resolved);
    assertTrue(resolved.contains("dense_layers=2,") || resolved.endsWith("dense_layers=2"), resolved); // quest untouched
    assertEquals(s.canonical(), resolved.replace("layers=2(2)", "layers=2"));
    assertEquals("dense", PolicySpec.DENSE.resolved("2-3"));
    assertEquals(PolicySpec.parse("tokenselect").canonical(), PolicySpec.parse("tokenselect").resolved(null));
  }

  @Test
  void theCatalogSaysWhichBackendRunsWhat() {
    for (String name : PolicyCatalog.all()) assertTrue(PolicyCatalog.runsOn(name, Backend.CPU), name);
    assertFalse(PolicyCatalog.runsOn("h2o", Backend.CUDA));
    assertNull(PolicySpec.parse("selkv:gate=0.9").unsupportedReason(Backend.CPU));
    assertEquals("selkv gate=0.9 (a CPU-only diagnostic)", PolicySpec.parse("selkv:gate=0.9").unsupportedReason(Backend.CUDA));
    assertNull(PolicySpec.parse("selkv:gate=0").unsupportedReason(Backend.CUDA)); // the default is the spec
  }

  @Test
  void sameTokenSelectInBothSlotsIsShared() {
    assertTrue(PolicySpec.parse("tokenselect").sharesTokenSelect());
    assertFalse(PolicySpec.parse("tokenselect:k=64 + tokenselect:k=32").sharesTokenSelect());
    assertFalse(PolicySpec.parse("tsa + tokenselect").sharesTokenSelect());
  }
}
