package io.longsieve.bench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** The FP8 bench's shapes and the peer keys it reads from tools/bench_fp8_peer.py (no GPU). */
class Fp8BenchPlanTest {

  @Test
  void layerShapesAreTheModels() {
    assertArrayEquals(new int[][] {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}},
        Fp8Bench.shapes(Bench.llama3_8b()));
    assertArrayEquals(new int[][] {{10240, 8192}, {8192, 8192}, {57344, 8192}, {8192, 28672}},
        Fp8Bench.shapes(Fp8Bench.llama3_70b()));
  }

  @Test
  void thePeerWritesTheKeysTheBenchReads() throws Exception {
    String peer = Files.readString(Path.of("..", "tools", "bench_fp8_peer.py"));
    for (String k : new String[] {"key + \" rowwise\"", "key + \" block128\"", "\"fp8_gemm\"", "\"bf16_gemm\"",
        "\"fp8_quant\"", "\"fp8_matmul_tflops\"", "key = f\"{model} {name}\"", "(\"qkv\"", "(\"o\"", "(\"gate_up\"",
        "(\"down\""}) {
      assertTrue(peer.contains(k), "tools/bench_fp8_peer.py no longer writes " + k);
    }
    assertArrayEquals(new String[] {"qkv", "o", "gate_up", "down"}, Fp8Bench.NAMES);
  }
}
