package io.longsieve.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code generate --dump-selections} on the CPU backend and the tiny llama-gqa checkpoint: the index
 * (format, backend, shapes, policy), one event per sparse selection with its arrays at the sizes the
 * index gives, each layer's keys long enough for every event of the layer and holding what the
 * events were computed from (a TSA event's keys are the ones in the file); one run only; a KV policy
 * that rewrites the cache between two selections fails the run instead of writing keys that no
 * longer match.
 */
class SelectionDumpTest {

  static final Path MODEL = GenerateCommandTest.MODEL;

  static Path prompt(Path dir, int n) throws Exception {
    Random r = new Random(3);
    int[] ids = new int[n];
    for (int i = 0; i < n; i++) ids[i] = r.nextInt(990);
    return GenerateCommandTest.idsFile(dir, "prompt.ids", ids);
  }

  static int run(Path ids, Path out, String policy, String... more) {
    String[] base = {"generate", "--model", MODEL.toString(), "--device", "cpu", "--threads", "2", "--prompt-ids",
        ids.toString(), "--policy", policy, "--dump-selections", out.toString()};
    String[] args = java.util.Arrays.copyOf(base, base.length + more.length);
    System.arraycopy(more, 0, args, base.length, more.length);
    return EngineCli.commandLine().execute(args);
  }

  @Test
  void tokenSelectAndTsaDumpsHoldEveryArrayTheIndexNames(@TempDir Path dir) throws Exception {
    Path ids = prompt(dir, 300);
    assertEquals(0, run(ids, dir.resolve("ts"), "tokenselect:sinks=4,k=24,window=16,chunk=16,gqa=mod",
        "--max-new-tokens", "4", "--ignore-eos"));
    JsonNode ts = check(dir.resolve("ts"), "tokenselect");
    assertTrue(ts.get("policy").asText().startsWith("tokenselect:sinks=4,k=24,"), ts.get("policy").asText());
    int decodes = 0;
    for (JsonNode e : ts.get("events")) decodes += e.get("decode").asBoolean() ? 1 : 0;
    assertEquals(3 * 4, decodes, "3 decode steps after the first token, 4 layers");

    assertEquals(0, run(ids, dir.resolve("tsa"), "tsa:tau=0.2,min=32,window=16,layers=all,chunk=0",
        "--max-new-tokens", "1"));
    JsonNode tsa = check(dir.resolve("tsa"), "tsa");
    assertEquals(4, tsa.get("events").size(), "one selection per layer over the whole prompt");
    for (JsonNode e : tsa.get("events")) {
      assertEquals(300, e.get("end").asInt());
      assertEquals(16, e.get("w").asInt());
      assertEquals(e.get("keep").asInt() + 16, e.get("lists").get("shape").get(1).asInt());
    }
  }

  @Test
  void oneRunOnlyAndACompactedCacheFailsTheDump(@TempDir Path dir) throws Exception {
    Path ids = prompt(dir, 300);
    assertEquals(2, run(ids, dir.resolve("two"), "tokenselect", "--max-new-tokens", "2,3"));
    assertEquals(2, run(ids, dir.resolve("warm"), "tokenselect", "--warmup-tokens", "8"));
    assertFalse(Files.exists(dir.resolve("two").resolve("index.json")));
    // SelKV compacts the cache after the prefill: the decode steps' keys no longer extend the prefill's
    String ts = "tokenselect:sinks=4,k=24,window=16,chunk=16";
    assertNotEquals(0, run(ids, dir.resolve("selkv"), ts + " + selkv:ratio=0.5 + " + ts, "--max-new-tokens", "3",
        "--ignore-eos"));
    assertFalse(Files.exists(dir.resolve("selkv").resolve("index.json")), "no index for a run that failed");
  }

  /** Checks the dump's index against its files; returns the index. */
  static JsonNode check(Path dump, String kind) throws Exception {
    JsonNode index = new ObjectMapper().readTree(dump.resolve("index.json").toFile());
    assertEquals("longsieve-selection-dump/1", index.get("format").asText());
    assertEquals("cpu", index.get("backend").asText());
    JsonNode c = index.get("config");
    assertEquals(4, c.get("heads").asInt());
    assertEquals(2, c.get("kv_heads").asInt());
    assertEquals(16, c.get("head_dim").asInt());
    Map<String, Integer> keySlots = new HashMap<>();
    for (JsonNode k : index.get("keys")) {
      assertEquals(2, k.get("shape").get(1).asInt());
      assertEquals(16, k.get("shape").get(2).asInt());
      keySlots.put(k.get("file").asText(), size(dump, k) / (2 * 16));
    }
    assertTrue(index.get("events").size() > 0, "some selections");
    for (JsonNode e : index.get("events")) {
      assertEquals(kind, e.get("kind").asText());
      String keys = e.get("keys").asText();
      assertTrue(keySlots.containsKey(keys), keys);
      assertTrue(keySlots.get(keys) >= e.get("end").asInt(), "the layer's keys cover the event's cache");
      for (String array : new String[] {"queries", "lists", kind.equals("tsa") ? "scores" : "votes"}) size(dump, e.get(array));
    }
    if (kind.equals("tsa")) {  // the window queries dotted with the last key: finite, and the keys not all zero
      JsonNode e = index.get("events").get(0);
      float[] k = floats(dump.resolve(e.get("keys").asText()));
      double norm = 0;
      for (float x : k) norm += x * x;
      assertTrue(norm > 0 && Double.isFinite(norm));
    }
    return index;
  }

  /** The file's length in 4-byte values, checked against the shape's product. */
  static int size(Path dump, JsonNode ref) throws Exception {
    long product = 1;
    for (JsonNode x : ref.get("shape")) product *= x.asLong();
    long bytes = Files.size(dump.resolve(ref.get("file").asText()));
    assertEquals(product * 4, bytes, ref.toString());
    return (int) product;
  }

  static float[] floats(Path f) throws Exception {
    ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(f)).order(ByteOrder.LITTLE_ENDIAN);
    float[] out = new float[b.remaining() / 4];
    b.asFloatBuffer().get(out);
    return out;
  }
}
