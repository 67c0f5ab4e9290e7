package io.longsieve.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.longsieve.engine.GenerationStats;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.SelectionProbe;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Supplier;

/**
 * {@code generate --dump-selections DIR}: writes every sparse selection of one run of Token Sparse
 * Attention or TokenSelect ({@link SelectionProbe}) with the tensors it was computed from, for
 * tools/gpu_host/official_crosscheck.py, which runs the official selection code on them. Layout of DIR:
 * <pre>
 *   index.json         format, backend, device, model shapes, policy (canonical and resolved), prompt
 *                      length, "keys" (one file per layer and kind) and "events" (one per selection)
 *   eNNNN_*.f32|i32    an event's arrays, raw little-endian, shapes in index.json
 *   keys_KIND_LL.f32   (end, kvHeads, headDim) a layer's keys over the longest end an event saw:
 *                      KIND rope (TSA: rotated at their positions) or pre (TokenSelect: before RoPE)
 * </pre>
 * An event reads its keys as keys[0:end] of its layer's file: the cache of these policies only
 * appends, which every event checks (keys that changed under an earlier event fail the run).
 * Not thread-safe beyond one run: the engine reports on its own thread, the methods are synchronised.
 */
final class SelectionDump implements SelectionProbe.Listener {

  private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

  private final Path dir;
  private final ArrayNode events = JSON.createArrayNode();
  private final Map<String, float[]> keys = new HashMap<>();    // file name -> (end, kvHeads, headDim) f32
  private final Map<String, Integer> keyLayer = new HashMap<>(); // file name -> layer

  /** Creates DIR (and its parents); fails with an IOException naming it when it cannot be written. */
  SelectionDump(Path dir) throws IOException {
    this.dir = dir;
    Files.createDirectories(dir);
    if (!Files.isWritable(dir)) throw new IOException(dir + " is not writable");
  }

  @Override
  public synchronized void tsa(SelectionProbe.Tsa s) {
    int n = events.size();
    ObjectNode e = event("tsa", n, s.layer(), s.pos0(), s.rows(), s.end());
    e.put("w", s.w());
    e.put("keep", s.keep());
    e.put("keys", grow("rope", s.layer(), s.end(), s.keys()));
    e.set("queries", write(n, "q", s.queries(), s.w(), s.heads(), s.queries().length / (s.w() * s.heads())));
    e.set("scores", write(n, "scores", s.scores(), s.heads(), s.end() - s.w()));
    e.set("lists", write(n, "lists", s.lists(), s.heads(), s.keep() + s.w()));
  }

  @Override
  public synchronized void tokenSelect(SelectionProbe.TokenSelect s) {
    int n = events.size();
    ObjectNode e = event("tokenselect", n, s.layer(), s.pos0(), s.rows(), s.end());
    e.put("decode", s.decode());
    e.put("keys", grow("pre", s.layer(), s.end(), s.keys()));
    e.set("queries", write(n, "q", s.queries(), s.rows(), s.queries().length / s.rows()));
    e.set("votes", write(n, "votes", s.votes(), s.listCount(), s.votes().length / s.listCount()));
    e.set("lists", write(n, "lists", s.lists(), s.listCount(), s.lists().length / s.listCount()));
  }

  private ObjectNode event(String kind, int n, int layer, int pos0, int rows, int end) {
    ObjectNode e = events.addObject();
    e.put("id", n);
    e.put("kind", kind);
    e.put("layer", layer);
    e.put("pos0", pos0);
    e.put("rows", rows);
    e.put("end", end);
    return e;
  }

  /**
   * Keeps a layer's keys over the longest end seen, checking that this event's keys and the kept copy
   * agree on the slots both hold (the cache only appended); returns the key file's name.
   */
  private String grow(String kind, int layer, int end, Supplier<float[]> read) {
    String name = String.format("keys_%s_%02d.f32", kind, layer);
    float[] k = read.get(), old = keys.get(name);
    int both = old == null ? 0 : Math.min(old.length, k.length);
    if (old != null && !Arrays.equals(old, 0, both, k, 0, both)) {
      throw new IllegalStateException("selection dump: layer " + layer + "'s cached keys changed between two "
          + "selections (a KV policy compacted the cache?); dump TSA or TokenSelect alone");
    }
    if (old == null || k.length > old.length) keys.put(name, k);
    keyLayer.put(name, layer);
    return name;
  }

  /** Writes an f32 array of the given shape as event n's file {@code what}. */
  private ObjectNode write(int n, String what, float[] a, int... shape) {
    ByteBuffer b = ByteBuffer.allocate(a.length * 4).order(ByteOrder.LITTLE_ENDIAN);
    b.asFloatBuffer().put(a);
    return file(String.format("e%04d_%s.f32", n, what), b, a.length, shape);
  }

  /** Writes an i32 array of the given shape as event n's file {@code what}. */
  private ObjectNode write(int n, String what, int[] a, int... shape) {
    ByteBuffer b = ByteBuffer.allocate(a.length * 4).order(ByteOrder.LITTLE_ENDIAN);
    b.asIntBuffer().put(a);
    return file(String.format("e%04d_%s.i32", n, what), b, a.length, shape);
  }

  private ObjectNode file(String name, ByteBuffer b, int length, int... shape) {
    long product = 1;
    for (int x : shape) product *= x;
    if (product != length) {
      throw new IllegalStateException("selection dump: " + name + " holds " + length + " values, not " + Arrays.toString(shape));
    }
    try (FileChannel ch = FileChannel.open(dir.resolve(name), StandardOpenOption.CREATE, StandardOpenOption.WRITE,
        StandardOpenOption.TRUNCATE_EXISTING)) {
      while (b.hasRemaining()) ch.write(b);
    } catch (IOException ex) {
      throw new UncheckedIOException("selection dump: " + dir.resolve(name), ex);
    }
    ObjectNode f = JSON.createObjectNode();
    f.put("file", name);
    ArrayNode s = f.putArray("shape");
    for (int x : shape) s.add(x);
    return f;
  }

  /**
   * Writes the keys and index.json once the run finished: what ran (stats), the model's shapes and the
   * prompt length; returns the number of selections written.
   */
  synchronized int finish(Path model, ModelConfig c, GenerationStats stats) throws IOException {
    ArrayNode keyFiles = JSON.createArrayNode();
    for (Map.Entry<String, float[]> k : keys.entrySet()) {
      ByteBuffer b = ByteBuffer.allocate(k.getValue().length * 4).order(ByteOrder.LITTLE_ENDIAN);
      b.asFloatBuffer().put(k.getValue());
      int len = k.getValue().length;
      ObjectNode f = file(k.getKey(), b, len, len / c.kvDim(), c.numKvHeads(), c.headDim());
      f.put("layer", keyLayer.get(k.getKey()));
      keyFiles.add(f);
    }
    ObjectNode root = JSON.createObjectNode();
    root.put("format", "longsieve-selection-dump/1");
    root.put("backend", stats.backend());
    root.put("device", stats.device());
    root.put("model", model.toString());
    root.put("policy", stats.policy());
    root.put("policy_resolved", stats.policyResolved());
    root.put("prompt_tokens", stats.inputTokens());
    ObjectNode m = root.putObject("config");
    m.put("layers", c.numLayers());
    m.put("heads", c.numHeads());
    m.put("kv_heads", c.numKvHeads());
    m.put("head_dim", c.headDim());
    m.put("rope_theta", c.ropeTheta());
    m.put("rope_scaling", c.ropeScaling().type());
    root.set("keys", keyFiles);
    root.set("events", events);
    JSON.writeValue(dir.resolve("index.json").toFile(), root);
    return events.size();
  }
}
