package io.longsieve.model;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One memory-mapped safetensors file: an 8-byte little-endian header length, a JSON header of
 * {name: {dtype, shape, data_offsets}}, then the raw data. Every offset is checked on open (inside
 * the file, size = elements × dtype size, no overlaps), so a truncated or corrupt file is refused
 * with the tensor named before any weight is read. Data is read through mappings of at most 1 GiB,
 * never as one heap copy of the file.
 */
public final class SafetensorsFile implements AutoCloseable {

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final long MAP_WINDOW = 1L << 30;

  private final Path path;
  private final FileChannel channel;
  private final Map<String, TensorInfo> tensors;

  private SafetensorsFile(Path path, FileChannel channel, Map<String, TensorInfo> tensors) {
    this.path = path;
    this.channel = channel;
    this.tensors = tensors;
  }

  public static SafetensorsFile open(Path path) {
    FileChannel ch;
    try {
      ch = FileChannel.open(path, StandardOpenOption.READ);
    } catch (IOException e) {
      throw new CheckpointException(path + ": cannot open: " + e.getMessage(), e);
    }
    try {
      return new SafetensorsFile(path, ch, readHeader(path, ch));
    } catch (RuntimeException e) {
      closeQuietly(ch);
      throw e;
    }
  }

  private static Map<String, TensorInfo> readHeader(Path path, FileChannel ch) {
    try {
      long size = ch.size();
      if (size < 8) throw new CheckpointException(path + ": file of " + size + " bytes is too short for a safetensors header");
      ByteBuffer lenBuf = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
      ch.read(lenBuf, 0);
      long headerLen = lenBuf.flip().getLong();
      if (headerLen <= 0 || headerLen > size - 8 || headerLen > 100_000_000) {
        throw new CheckpointException(path + ": header length " + headerLen + " is beyond the file (" + size + " bytes)");
      }
      ByteBuffer header = ByteBuffer.allocate((int) headerLen);
      ch.read(header, 8);
      JsonNode root;
      try {
        root = JSON.readTree(new String(header.array(), StandardCharsets.UTF_8));
      } catch (JsonProcessingException e) {
        throw new CheckpointException(path + ": header is not valid JSON: " + e.getOriginalMessage(), e);
      }
      if (root == null || !root.isObject()) throw new CheckpointException(path + ": header is not a JSON object");
      return parseTensors(path, root, 8 + headerLen, size);
    } catch (IOException e) {
      throw new CheckpointException(path + ": cannot read header: " + e.getMessage(), e);
    }
  }

  private static Map<String, TensorInfo> parseTensors(Path path, JsonNode root, long dataStart, long fileSize) {
    Map<String, TensorInfo> out = new LinkedHashMap<>();
    for (Iterator<Map.Entry<String, JsonNode>> it = root.fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      String name = e.getKey();
      if (name.equals("__metadata__")) continue;
      JsonNode t = e.getValue();
      String where = path + ": tensor '" + name + "'";
      String dtypeName = t.path("dtype").asText("");
      DType dtype = DType.ofSafetensors(dtypeName);
      if (dtype == null) throw new CheckpointException(where + ": dtype '" + dtypeName + "' is not supported (BF16, F16, F32)");
      JsonNode shapeNode = t.path("shape");
      JsonNode offs = t.path("data_offsets");
      if (!shapeNode.isArray() || !offs.isArray() || offs.size() != 2) {
        throw new CheckpointException(where + ": needs 'shape' and a two-element 'data_offsets'");
      }
      long[] shape = new long[shapeNode.size()];
      for (int i = 0; i < shape.length; i++) {
        shape[i] = shapeNode.get(i).asLong(-1);
        if (shape[i] < 0) throw new CheckpointException(where + ": shape " + shapeNode + " has a negative dimension");
      }
      long begin = offs.get(0).asLong(-1), end = offs.get(1).asLong(-1);
      if (begin < 0 || end < begin || dataStart + end > fileSize) {
        throw new CheckpointException(where + ": data_offsets " + offs + " are out of range (data section is "
            + (fileSize - dataStart) + " bytes)");
      }
      TensorInfo info = new TensorInfo(path, name, dtype, shape, dataStart + begin, dataStart + end);
      if (end - begin != info.numel() * dtype.bytes) {
        throw new CheckpointException(where + ": data_offsets " + offs + " span " + (end - begin) + " bytes but shape "
            + shapeNode + " of " + dtypeName + " needs " + info.numel() * dtype.bytes);
      }
      out.put(name, info);
    }
    List<TensorInfo> byStart = new ArrayList<>(out.values());
    byStart.sort(Comparator.comparingLong(TensorInfo::start));
    for (int i = 1; i < byStart.size(); i++) {
      TensorInfo a = byStart.get(i - 1), b = byStart.get(i);
      if (b.start() < a.end()) {
        throw new CheckpointException(path + ": tensors '" + a.name() + "' and '" + b.name() + "' overlap in data_offsets");
      }
    }
    return out;
  }

  public Path path() {
    return path;
  }

  public Map<String, TensorInfo> tensors() {
    return tensors;
  }

  /** Widens the tensor to fp32 into {@code dst} (length = numel). */
  public void readFloats(TensorInfo t, float[] dst) {
    if (dst.length != t.numel()) throw new IllegalArgumentException("dst has " + dst.length + " floats, tensor " + t.numel());
    long bytes = t.end() - t.start();
    int elem = t.dtype().bytes;
    long window = (MAP_WINDOW / elem) * elem;
    int di = 0;
    try {
      for (long off = 0; off < bytes; off += window) {
        long len = Math.min(window, bytes - off);
        MappedByteBuffer map = channel.map(FileChannel.MapMode.READ_ONLY, t.start() + off, len);
        map.order(ByteOrder.LITTLE_ENDIAN);
        int n = (int) (len / elem);
        switch (t.dtype()) {
          case F32: map.asFloatBuffer().get(dst, di, n); break;
          case BF16: for (int i = 0; i < n; i++) dst[di + i] = DType.bf16ToFloat(map.getShort(i * 2)); break;
          case F16: for (int i = 0; i < n; i++) dst[di + i] = DType.f16ToFloat(map.getShort(i * 2)); break;
          default: throw new IllegalStateException();
        }
        di += n;
      }
    } catch (IOException e) {
      throw new CheckpointException(path + ": cannot read tensor '" + t.name() + "': " + e.getMessage(), e);
    }
  }

  @Override
  public void close() {
    closeQuietly(channel);
  }

  private static void closeQuietly(FileChannel ch) {
    try {
      ch.close();
    } catch (IOException ignored) {
      // nothing was written; a failed close of a read-only channel loses nothing
    }
  }
}
