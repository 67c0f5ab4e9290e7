package io.longsieve.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import io.longsieve.model.ModelConfig;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** Where a reused prefix may end, per policy and backend (docs/prefix-reuse.md has the table). */
class PrefixReuseRulesTest {

  static final PrefixReuse.Cuts CPU = new PrefixReuse.Cuts(512, true);
  static final PrefixReuse.Cuts GPU = new PrefixReuse.Cuts(4096, false);

  static int reusable(String policy, int shared, int prompt, PrefixReuse.Cuts cuts) {
    return PrefixReuse.reusableTokens(PolicySpec.parse(policy), shared, prompt, cuts);
  }

  @Test
  void denseReusesTheWholeSharedPartOnTheCpuAndWholeChunksOnTheGpu() {
    assertEquals(8000, reusable("dense", 8000, 8030, CPU));
    assertEquals(4096, reusable("dense", 8000, 8030, GPU));
    assertEquals(8192, reusable("dense", 8200, 8230, GPU));
    assertEquals(0, reusable("dense", 4000, 4030, GPU)); // under one chunk: nothing on the GPU
    assertEquals(8029, reusable("dense", 9000, 8030, CPU)); // the row prefills its last token itself
    assertEquals(0, reusable("dense", 0, 8030, CPU));
  }

  @Test
  void chunkedSelectionReusesWholeSelectionChunksOnly() {
    assertEquals(7680, reusable("tokenselect", 8000, 8030, CPU));
    // TSA selects once per its own chunk (default 4096), whatever the backend's forward chunk
    assertEquals(4096, reusable("tsa", 8000, 8030, CPU));
    assertEquals(4096, reusable("tsa", 8000, 8030, GPU));
    assertEquals(7680, reusable("tsa:chunk=512", 8000, 8030, CPU));
    assertEquals(7680, reusable("tsa:chunk=512", 8000, 8030, GPU)); // not whole GPU chunks: the GPU prefills it in 512s
    assertEquals(0, reusable("tsa:chunk=0", 8000, 8030, CPU));      // one selection over the whole prompt
    assertEquals(0, reusable("tsa:chunk=0", 8000, 8030, GPU));
  }

  @Test
  void aTsaPrefixIsKeyedByItsChunkNotTheForwardChunk() {
    assertEquals(PrefixReuse.stateKey(PolicySpec.parse("tsa:chunk=512"), CPU),
        PrefixReuse.stateKey(PolicySpec.parse("tsa:chunk=512"), new PrefixReuse.Cuts(256, true)));
    assertNotEquals(PrefixReuse.stateKey(PolicySpec.parse("tsa:chunk=512"), CPU),
        PrefixReuse.stateKey(PolicySpec.parse("tsa:chunk=1024"), CPU));
  }

  @Test
  void compressionThatObservesTheLastQueriesKeepsThemInTheRowsOwnPart() {
    // snapkv's and selkv's window (32) must lie after the prefix; h2o and streaming read no window
    assertEquals(8030 - 32, reusable("snapkv", 8020, 8030, CPU));
    assertEquals(8030 - 32, reusable("selkv", 8020, 8030, CPU));
    assertEquals(8020, reusable("h2o", 8020, 8030, CPU));
    assertEquals(8020, reusable("streaming", 8020, 8030, CPU));
    assertEquals(7168, reusable("tokenselect + snapkv:window=400 + tokenselect", 8020, 8030, CPU)); // 7630, down to a chunk
  }

  static ModelConfig model(String name) {
    return ModelConfig.read(Path.of("src/test/resources/models", name));
  }

  @Test
  void aRopeThatFollowsThePromptLengthKeysThePrefixByItsTable() {
    PolicySpec dense = PolicySpec.parse("dense");
    ModelConfig longrope = model("phi3-longrope"); // original_max_position_embeddings 64
    assertEquals(PrefixReuse.stateKey(dense, CPU, longrope, 20), PrefixReuse.stateKey(dense, CPU, longrope, 64));
    assertNotEquals(PrefixReuse.stateKey(dense, CPU, longrope, 64), PrefixReuse.stateKey(dense, CPU, longrope, 65));
    assertEquals(PrefixReuse.stateKey(dense, CPU, longrope, 65), PrefixReuse.stateKey(dense, CPU, longrope, 200));
    ModelConfig dynamic = model("llama-dynamic");  // max_position_embeddings 64: each longer call its own base
    assertEquals(PrefixReuse.stateKey(dense, CPU, dynamic, 20), PrefixReuse.stateKey(dense, CPU, dynamic, 64));
    assertNotEquals(PrefixReuse.stateKey(dense, CPU, dynamic, 64), PrefixReuse.stateKey(dense, CPU, dynamic, 70));
    assertNotEquals(PrefixReuse.stateKey(dense, CPU, dynamic, 70), PrefixReuse.stateKey(dense, CPU, dynamic, 71));
    ModelConfig plain = model("llama-gqa");        // one table whatever the length: the policy's key alone
    assertEquals(PrefixReuse.stateKey(dense, CPU), PrefixReuse.stateKey(dense, CPU, plain, 20));
    assertEquals(PrefixReuse.stateKey(dense, CPU), PrefixReuse.stateKey(dense, CPU, plain, 5000));
  }

  @Test
  void theStateKeySeparatesWhatComputesADifferentPrefix() {
    String dense = PrefixReuse.stateKey(PolicySpec.parse("dense"), CPU);
    assertEquals(dense, PrefixReuse.stateKey(PolicySpec.parse("dense + snapkv + quest"), CPU)); // same prefill, no state
    assertNotEquals(dense, PrefixReuse.stateKey(PolicySpec.parse("h2o"), CPU));                  // carries scores
    assertNotEquals(PrefixReuse.stateKey(PolicySpec.parse("tokenselect"), CPU),
        PrefixReuse.stateKey(PolicySpec.parse("tokenselect"), new PrefixReuse.Cuts(256, true))); // another chunk
    assertNotEquals(PrefixReuse.stateKey(PolicySpec.parse("tokenselect:k=64"), CPU),
        PrefixReuse.stateKey(PolicySpec.parse("tokenselect:k=128"), CPU));
    assertEquals(dense, PrefixReuse.stateKey(PolicySpec.parse("dense"), new PrefixReuse.Cuts(256, true)));
  }
}
