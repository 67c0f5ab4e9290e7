package io.longsieve.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.longsieve.model.DType;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.TensorInfo;
import io.longsieve.model.TensorPlan;
import io.longsieve.policy.KvFootprint;
import io.longsieve.policy.PolicySpec;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * inspect's byte counts for Llama-3.1-8B, Qwen3-8B and Gemma-3-12B shapes against each config's own
 * arithmetic, written out here term by term. The configs are the published config.json files
 * (src/test/resources/configs); the tensors are the headers a bf16 checkpoint of those shapes has
 * (TensorPlan's list with bf16 offsets): no weights are needed, as inspect reads none.
 */
class InspectArithmeticTest {

  private static Inspection bf16(String name) throws Exception {
    Path file = Path.of("src/test/resources/configs", name + ".json");
    ModelConfig c = ModelConfig.parse(new ObjectMapper().readTree(file.toFile()), name);
    List<TensorInfo> tensors = new ArrayList<>();
    long at = 0;
    for (TensorPlan.Tensor t : TensorPlan.of(c)) {
      if (t.optional()) continue;  // a tied lm_head is not stored
      long n = 1;
      for (long s : t.shape()) n *= s;
      tensors.add(new TensorInfo(Path.of(name + ".safetensors"), t.name(), DType.BF16, t.shape(), at, at + 2 * n));
      at += 2 * n;
    }
    return Inspection.of(c, "", tensors, List.of());
  }

  /** Per layer: q, k, v, o projections, three MLP matrices, and its norm vectors. */
  private static long layer(long d, long q, long kv, long h, long norms) {
    return d * q + 2 * d * kv + q * d + 3 * d * h + norms;
  }

  @Test
  void llama31With8BParameters() throws Exception {
    Inspection in = bf16("llama-3.1-8b");
    long d = 4096, vocab = 128256, layers = 32;
    long params = 2 * vocab * d + layers * layer(d, 4096, 1024, 14336, 2 * d) + d;  // embed + lm_head, layers, final norm
    assertEquals(8_030_261_248L, params);                                            // Meta's published count
    check(in, params, (layers * 2 + 1) * d);
    assertEquals(3L * 2 * 32 * 1024, in.kvSlotBytes());                             // 196,608 B/token
    assertEquals(131_072L, KvFootprint.keyValueBytes(in.config()));                 // the usual 128 KiB of K+V
  }

  @Test
  void qwen3With8BParametersAndQkNorms() throws Exception {
    Inspection in = bf16("qwen3-8b-yarn");
    long d = 4096, vocab = 151936, layers = 36;
    long params = 2 * vocab * d + layers * layer(d, 4096, 1024, 12288, 2 * d + 2 * 128) + d;
    assertEquals(8_190_735_360L, params);
    check(in, params, layers * (2 * d + 2 * 128) + d);
    assertEquals(3L * 2 * 36 * 1024, in.kvSlotBytes());                             // 221,184 B/token
  }

  @Test
  void gemma3With12BTextParametersTiedAndFourNormsALayer() throws Exception {
    Inspection in = bf16("gemma-3-12b-text");
    long d = 3840, vocab = 262208, layers = 48;
    long params = vocab * d + layers * layer(d, 16 * 256, 8 * 256, 15360, 4 * d + 2 * 256) + d;  // tied: one embedding
    assertEquals(11_766_034_176L, params);
    check(in, params, layers * (4 * d + 2 * 256) + d);
    assertEquals(3L * 2 * 48 * 2048, in.kvSlotBytes());                             // 589,824 B/token: all 48 layers keep every token
  }

  /** Stored bf16: 2 bytes an element; on the GPU matrices stay bf16, 1-D tensors become f32. */
  private static void check(Inspection in, long params, long vectorElements) {
    assertEquals(params, in.parameters());
    assertEquals(2 * params, in.storedBytes());
    assertEquals(2 * (params - vectorElements) + 4 * vectorElements, in.deviceWeightBytes());
  }

  @Test
  void fitOf141GbFollowsFromTheBytes() throws Exception {
    Inspection in = bf16("llama-3.1-8b");
    Inspection.Fit f = in.fit(141_000_000_000L, 0.9, 512, 131072);
    assertEquals(126_900_000_000L, f.budget());
    assertEquals(in.deviceWeightBytes(), f.weights());
    assertEquals(f.budget() - f.weights() - f.activations(), f.kvRoom());
    long page = 64 * in.kvSlotBytes() + 4;
    assertEquals(f.kvRoom() / page * 64, f.longestTokens());
    assertTrue(f.longestTokens() > 500_000 && f.longestTokens() < 600_000, "" + f.longestTokens());
    long held = 2048 * page;                                                           // 131072 slots: 2048 pages
    assertEquals(held, KvFootprint.heldBytes(in.config(), PolicySpec.DENSE.kv(), 131072));
    assertEquals(f.kvRoom() / held, (long) f.concurrent().get("none"));               // 4 documents of 128K at once
    assertEquals(4L, (long) f.concurrent().get("none"));
    long bias = 131072L * 32 * 8 * 4;                                                  // SelKV's f32 logit bias, every slot
    assertEquals(f.kvRoom() / (held + bias), (long) f.concurrent().get("selkv"));
  }

  @Test
  void kvPoliciesKeepWhatTheirBudgetsSay() throws Exception {
    Inspection in = bf16("qwen3-8b-yarn");
    for (Inspection.KvLine l : in.kvLines(131072)) {
      long expect = switch (l.term().name()) {
        case "selkv" -> Math.round(0.25 * 131072);   // ratio 0.25
        case "snapkv" -> 2048;                        // capacity 2048
        case "h2o" -> 2 * Math.round(0.1 * 131072);   // heavy 0.1 + recent 0.1
        case "streaming" -> 4 + 2000;                 // sinks 4 + recent 2000
        default -> 131072;
      };
      assertEquals(expect, l.keptSlots(), l.term().name());
    }
    // Gemma 3: its 40 sliding layers keep every token whatever the policy
    Inspection g = bf16("gemma-3-12b-text");
    Inspection.KvLine snap = g.kvLines(131072).stream().filter(l -> l.term().name().equals("snapkv")).findFirst().orElseThrow();
    long perLayerSlot = 3L * 2 * 2048;
    assertEquals((40L * 131072 + 8L * 2048) * perLayerSlot, snap.bytesInUse());
  }
}
