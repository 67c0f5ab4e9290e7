package io.longsieve.model;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Mutated safetensors files, from a small valid one: random bytes, truncation, the header-length
 * field, and header fields replaced by wrong values (dtypes, shapes, offsets of every kind). Each
 * opens and reads back, or is refused with a CheckpointException; see {@link FuzzCases}.
 */
class SafetensorsFuzzTest {

  private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
  private static final ObjectMapper JSON = new ObjectMapper();

  @TempDir Path dir;

  private static SafetensorsWriter valid() {
    return new SafetensorsWriter()
        .add("a", new float[] {1, 2, 3, 4, 5, 6}, 2, 3)
        .add("b", "BF16", new float[] {1, -2, 3.5f, 0}, 4)
        .add("c", new float[] {7}, 1);
  }

  @Test
  void mutatedBytesGiveATensorOrACheckpointError() {
    FuzzCases.run("safetensors-bytes", 300, Duration.ofSeconds(5), (seed, r) -> {
      Path f = dir.resolve("bytes-" + seed + ".safetensors");
      valid().write(f);
      byte[] bytes = Files.readAllBytes(f);
      int headerEnd = 8 + (int) ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).getLong(0);
      switch (r.nextInt(4)) {
        case 0 -> FuzzCases.flipBits(bytes, 8, headerEnd, 1 + r.nextInt(8), r);   // inside the JSON
        case 1 -> bytes = Arrays.copyOf(bytes, r.nextInt(bytes.length));         // truncated anywhere
        case 2 -> ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).putLong(0, lengthField(r, bytes.length));
        default -> {                                                             // random bytes anywhere
          for (int i = 0, n = 1 + r.nextInt(16); i < n; i++) bytes[r.nextInt(bytes.length)] = (byte) r.nextInt(256);
        }
      }
      Files.write(f, bytes);
      openAndRead(f);
    });
  }

  @Test
  void mutatedHeaderFieldsGiveATensorOrACheckpointError() {
    FuzzCases.run("safetensors-header", 400, Duration.ofSeconds(5), (seed, r) -> {
      SafetensorsWriter w = valid();
      ObjectNode h = w.header();
      List<String> names = new ArrayList<>(List.of("a", "b", "c"));
      for (int i = 0, n = 1 + r.nextInt(3); i < n; i++) {
        String name = names.get(r.nextInt(names.size()));
        if (!(h.get(name) instanceof ObjectNode t)) continue;                 // replaced by an earlier mutation
        switch (r.nextInt(5)) {
          case 0 -> t.set("dtype", wrongValue(r, true));
          case 1 -> t.set("shape", numbers(r));
          case 2 -> t.set("data_offsets", numbers(r));
          case 3 -> t.set(r.nextBoolean() ? "shape" : "data_offsets", wrongValue(r, false));
          default -> h.set(name, wrongValue(r, false));                       // the entry itself
        }
      }
      Path f = dir.resolve("header-" + seed + ".safetensors");
      w.write(f, h);
      openAndRead(f);
    });
  }

  /** Opens, then reads every tensor it accepted: accepting means every offset is safe to read. */
  private static void openAndRead(Path f) throws IOException {
    try (SafetensorsFile st = SafetensorsFile.open(f)) {
      long fileSize = Files.size(f);
      for (TensorInfo t : st.tensors().values()) {
        if (t.end() > fileSize || t.numel() * t.dtype().bytes != t.end() - t.start()) {
          throw new AssertionError("accepted an inconsistent tensor " + t.name() + " " + t.shapeString());
        }
        st.readFloats(t, new float[(int) t.numel()]);
      }
    }
  }

  private static long lengthField(Random r, int fileSize) {
    long[] edges = {0, -1, Long.MIN_VALUE, Long.MAX_VALUE, fileSize, fileSize - 8, fileSize - 7, 1L << 32, 100_000_001};
    return r.nextBoolean() ? edges[r.nextInt(edges.length)] : r.nextLong();
  }

  /** An array of numbers at the edges: negative, zero, huge, past 64 bits, fractional. */
  private static ArrayNode numbers(Random r) {
    ArrayNode a = NODES.arrayNode();
    for (int i = 0, n = r.nextInt(5); i < n; i++) {
      switch (r.nextInt(7)) {
        case 0 -> a.add(r.nextInt(64));
        case 1 -> a.add(-1 - r.nextInt(4));
        case 2 -> a.add(Long.MAX_VALUE - r.nextInt(8));
        case 3 -> a.add(1L << (30 + r.nextInt(33)));
        case 4 -> a.add(BigInteger.TWO.pow(64).add(BigInteger.valueOf(r.nextInt(8))));
        case 5 -> a.add(r.nextDouble() * 100);
        default -> a.add(36028797018963969L);
      }
    }
    return a;
  }

  private static JsonNode wrongValue(Random r, boolean dtypeLike) {
    if (dtypeLike && r.nextBoolean()) {
      String[] names = {"F32", "F16", "BF16", "I8", "F64", "f32", "", "BF16 ", "U8"};
      return NODES.textNode(names[r.nextInt(names.length)]);
    }
    switch (r.nextInt(6)) {
      case 0: return NODES.nullNode();
      case 1: return NODES.numberNode(r.nextInt());
      case 2: return NODES.textNode("x".repeat(r.nextInt(4)));
      case 3: return NODES.booleanNode(r.nextBoolean());
      case 4: return NODES.objectNode().put("k", 1);
      default: {
        try {
          return JSON.readTree("[[1,2],[3]]".getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
          throw new AssertionError(e);
        }
      }
    }
  }
}
