package io.longsieve.cpu.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import io.longsieve.model.RopeScaling;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Per-KV-head compaction keeps every copy of a token (keys, rotated keys, values, position, and the bias
 * of the KV head's query heads) together.
 */
class KvCacheTest {

  final ModelConfig c = new ModelConfig("llama", 16, 8, 1, 4, 2, 4, 8, 1e-5, 10000.0, RopeScaling.NONE, 64, false,
      false, 0, -1, List.of());
  final Rope rope = new Rope(c);

  KvCache filled(int n) {
    KvCache kv = new KvCache(c, rope, 16);
    float[] k = new float[n * 8], v = new float[n * 8];
    for (int i = 0; i < k.length; i++) {
      k[i] = i;
      v[i] = -i;
    }
    kv.append(0, k, 0, v, 0, n, 100);
    return kv;
  }

  @Test
  void retainMovesEachHeadsOwnSlots() {
    KvCache kv = filled(10);
    float[] bias = kv.logitBias(0);
    for (int s = 0; s < 10; s++) for (int h = 0; h < 4; h++) bias[s * 4 + h] = s * 10 + h;  // (slot, query head)
    float[] roped = kv.ropedKeys[0].clone();
    kv.retain(0, new int[][] {{0, 3, 7}, {1, 2, 9}}, 3);
    assertEquals(3, kv.length(0));
    int[][] keep = {{0, 3, 7}, {1, 2, 9}};
    for (int g = 0; g < 2; g++) {
      for (int i = 0; i < 3; i++) {
        int from = keep[g][i];
        assertEquals(from * 8 + g * 4, kv.keys[0][i * 8 + g * 4], 0f);
        assertEquals(-(from * 8 + g * 4 + 3), kv.values[0][i * 8 + g * 4 + 3], 0f);
        assertEquals(roped[from * 8 + g * 4 + 1], kv.ropedKeys[0][i * 8 + g * 4 + 1], 0f);
        assertEquals(100 + from, kv.position(0, i, g));
        for (int h = 2 * g; h < 2 * g + 2; h++) assertEquals(from * 10 + h, bias[i * 4 + h], 0f);  // g's query heads
      }
    }
    for (int h = 0; h < 4; h++) assertEquals(0f, bias[3 * 4 + h], 0f); // freed slots carry no bias into later tokens
    kv.append(0, new float[8], 0, new float[8], 0, 1, 200);
    assertEquals(200, kv.position(0, 3, 0));
    assertEquals(200, kv.position(0, 3, 1));
  }

  @Test
  void retainWithTheSameListForEveryHeadKeepsSharedPositions() {
    KvCache kv = filled(6);
    kv.retain(0, new int[][] {{1, 4}, {1, 4}}, 2);
    assertNull(kv.headPositions[0]);
    assertArrayEquals(new int[] {101, 104}, Arrays.copyOf(kv.positions[0], 2));
  }

  @Test
  void bytesCountKeysValuesAndBias() {
    KvCache kv = filled(6);
    assertEquals(6L * 8 * 2 * 2, kv.bf16Bytes());
    kv.logitBias(0);
    assertEquals(6L * 8 * 2 * 2 + 6L * 4 * 4, kv.bf16Bytes());  // one f32 per slot and query head
  }
}
