package io.longsieve.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;

/** How the bench reads tools/bench_torch_peer.py's JSON for its "vs PyTorch" prefill attention (no GPU). */
class BenchPeerTest {

  static JsonNode json(String s) throws Exception {
    return new ObjectMapper().readTree(s);
  }

  @Test
  void prefillPeerIsTheFasterOfTheDefaultBackendAndFlash() throws Exception {
    JsonNode p = json("{\"sdpa_prefill\": {\"32768\": 14.2, \"131072\": 248.0}, "
        + "\"sdpa_prefill_flash\": {\"32768\": 25.3, \"131072\": 230.0, \"8192\": 1.8}, "
        + "\"sdpa_prefill_d64\": {\"32768\": 9.0}, \"sdpa_prefill_flash_d64\": {\"32768\": 11.0}}");
    assertEquals(14.2, Bench.peerPrefillMs(p, 128, 32768), 0);
    assertEquals(230.0, Bench.peerPrefillMs(p, 128, 131072), 0);  // flash faster here: it counts
    assertEquals(1.8, Bench.peerPrefillMs(p, 128, 8192), 0);      // default row missing (failed): flash alone
    assertEquals(9.0, Bench.peerPrefillMs(p, 64, 32768), 0);
    assertTrue(Double.isNaN(Bench.peerPrefillMs(p, 64, 8192)));
    assertTrue(Double.isNaN(Bench.peerPrefillMs(null, 128, 8192)));
  }

  @Test
  void aPeerFileFromBeforeIssue15StillReads() throws Exception {
    // the old script wrote flash-only under sdpa_prefill and nothing else
    JsonNode old = json("{\"sdpa_prefill\": {\"8192\": 1.8}}");
    assertEquals(1.8, Bench.peerPrefillMs(old, 128, 8192), 0);
  }
}
