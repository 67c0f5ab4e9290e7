package io.longsieve.model;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;

/**
 * A tiny random Llama checkpoint written by tests: config.json plus model.safetensors with the
 * tensor names and shapes transformers uses. No tokenizer (tests that need one copy a real
 * tokenizer.json next to it).
 */
public final class TinyCheckpoint {
  private TinyCheckpoint() {}

  public static final int DIM = 32, LAYERS = 2, HEADS = 4, KV_HEADS = 2, HIDDEN = 64, VOCAB = 96;

  public static String config() {
    return "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":" + DIM
        + ",\"intermediate_size\":" + HIDDEN + ",\"num_hidden_layers\":" + LAYERS + ",\"num_attention_heads\":" + HEADS
        + ",\"num_key_value_heads\":" + KV_HEADS + ",\"vocab_size\":" + VOCAB + ",\"rms_norm_eps\":1e-5,"
        + "\"rope_theta\":10000.0,\"max_position_embeddings\":512,\"tie_word_embeddings\":false,"
        + "\"bos_token_id\":1,\"eos_token_id\":2}";
  }

  /** All tensors of the tiny model with random values. */
  public static SafetensorsWriter weights(long seed) {
    Random r = new Random(seed);
    int q = HEADS * (DIM / HEADS), kv = KV_HEADS * (DIM / HEADS);
    SafetensorsWriter w = new SafetensorsWriter();
    w.add(WeightNames.EMBED, random(r, VOCAB * DIM, 1f), VOCAB, DIM);
    for (int i = 0; i < LAYERS; i++) {
      w.add(WeightNames.layer(i, WeightNames.ATTN_NORM), ones(DIM), DIM);
      w.add(WeightNames.layer(i, WeightNames.WQ), random(r, q * DIM, 0.2f), q, DIM);
      w.add(WeightNames.layer(i, WeightNames.WK), random(r, kv * DIM, 0.2f), kv, DIM);
      w.add(WeightNames.layer(i, WeightNames.WV), random(r, kv * DIM, 0.2f), kv, DIM);
      w.add(WeightNames.layer(i, WeightNames.WO), random(r, DIM * q, 0.2f), DIM, q);
      w.add(WeightNames.layer(i, WeightNames.FFN_NORM), ones(DIM), DIM);
      w.add(WeightNames.layer(i, WeightNames.W_GATE), random(r, HIDDEN * DIM, 0.2f), HIDDEN, DIM);
      w.add(WeightNames.layer(i, WeightNames.W_UP), random(r, HIDDEN * DIM, 0.2f), HIDDEN, DIM);
      w.add(WeightNames.layer(i, WeightNames.W_DOWN), random(r, DIM * HIDDEN, 0.2f), DIM, HIDDEN);
    }
    w.add(WeightNames.FINAL_NORM, ones(DIM), DIM);
    w.add(WeightNames.LM_HEAD, random(r, VOCAB * DIM, 0.2f), VOCAB, DIM);
    return w;
  }

  /** Writes config.json and model.safetensors into dir. */
  public static Path write(Path dir, long seed) throws IOException {
    Files.createDirectories(dir);
    Files.writeString(dir.resolve("config.json"), config());
    weights(seed).write(dir.resolve("model.safetensors"));
    return dir;
  }

  static float[] random(Random r, int n, float scale) {
    float[] a = new float[n];
    for (int i = 0; i < n; i++) a[i] = (float) r.nextGaussian() * scale;
    return a;
  }

  static float[] ones(int n) {
    float[] a = new float[n];
    java.util.Arrays.fill(a, 1f);
    return a;
  }
}
