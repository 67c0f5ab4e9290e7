package io.longsieve.model;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Writes safetensors files for tests, and lets a test bend the header (wrong offsets, lengths,
 * dtypes) to check that the loader refuses it.
 */
public final class SafetensorsWriter {

  private final Map<String, float[]> tensors = new LinkedHashMap<>();
  private final Map<String, long[]> shapes = new LinkedHashMap<>();
  private final Map<String, String> dtypes = new LinkedHashMap<>();

  public SafetensorsWriter add(String name, float[] data, long... shape) {
    return add(name, "F32", data, shape);
  }

  /** dtype "F32" or "BF16" (data rounded to bf16). */
  public SafetensorsWriter add(String name, String dtype, float[] data, long... shape) {
    tensors.put(name, data);
    shapes.put(name, shape);
    dtypes.put(name, dtype);
    return this;
  }

  /** The header as a mutable JSON object, for tests that corrupt it. */
  public ObjectNode header() {
    ObjectMapper json = new ObjectMapper();
    ObjectNode h = json.createObjectNode();
    long off = 0;
    for (String name : tensors.keySet()) {
      long bytes = (long) tensors.get(name).length * (dtypes.get(name).equals("F32") ? 4 : 2);
      ObjectNode t = h.putObject(name);
      t.put("dtype", dtypes.get(name));
      var shape = t.putArray("shape");
      for (long d : shapes.get(name)) shape.add(d);
      var offs = t.putArray("data_offsets");
      offs.add(off);
      offs.add(off + bytes);
      off += bytes;
    }
    h.putObject("__metadata__").put("format", "pt");
    return h;
  }

  public void write(Path file) throws IOException {
    write(file, header());
  }

  /** Writes the data with the given (possibly corrupted) header. */
  public void write(Path file, ObjectNode header) throws IOException {
    byte[] hdr = new ObjectMapper().writeValueAsString(header).getBytes(StandardCharsets.UTF_8);
    long dataBytes = 0;
    for (String name : tensors.keySet()) dataBytes += (long) tensors.get(name).length * (dtypes.get(name).equals("F32") ? 4 : 2);
    ByteBuffer buf = ByteBuffer.allocate((int) (8 + hdr.length + dataBytes)).order(ByteOrder.LITTLE_ENDIAN);
    buf.putLong(hdr.length).put(hdr);
    for (String name : tensors.keySet()) {
      for (float f : tensors.get(name)) {
        if (dtypes.get(name).equals("F32")) buf.putFloat(f);
        else buf.putShort(DType.floatToBf16(f));
      }
    }
    Files.write(file, buf.array());
  }
}
