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
  private static final long MAX_HEADER = 100_000_000; // the safetensors format's own limit

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
      while (lenBuf.hasRemaining()) {
        if (ch.read(lenBuf, lenBuf.position()) < 0) throw new CheckpointException(path + ": file ends inside the header length");
      }
      long headerLen = lenBuf.flip().getLong();
      if (headerLen <= 0 || headerLen > size - 8) {
        throw new CheckpointException(path + ": header length " + headerLen + " is beyond the file (" + size + " bytes)");
      }
      if (headerLen > MAX_HEADER) {
        throw new CheckpointException(path + ": header length " + headerLen + " is above the " + MAX_HEADER + "-byte limit");
      }
      ByteBuffer header = ByteBuffer.allocate((int) headerLen);
      // a positional read may return less than asked for; the length was checked against the size
      while (header.hasRemaining()) {
        if (ch.read(header, 8 + header.position()) < 0) throw new CheckpointException(path + ": file ends inside the header");
      }
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
    long dataBytes = fileSize - dataStart;
    for (Iterator<Map.Entry<String, JsonNode>> it = root.fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      String name = e.getKey();
      if (name.equals("__metadata__")) continue;
      JsonNode t = e.getValue();
      String where = path + ": tensor '" + name + "'";
      if (!t.isObject()) throw new CheckpointException(where + ": is not an object of dtype, shape and data_offsets");
      JsonNode dtypeNode = t.path("dtype");
      String dtypeName = dtypeNode.isTextual() ? dtypeNode.asText() : String.valueOf(dtypeNode);
      DType dtype = DType.ofSafetensors(dtypeName);
      if (dtype == null) throw new CheckpointException(where + ": dtype '" + dtypeName + "' is not supported (BF16, F16, F32, F8_E4M3)");
      JsonNode shapeNode = t.path("shape");
      JsonNode offs = t.path("data_offsets");
      if (!shapeNode.isArray() || !offs.isArray() || offs.size() != 2) {
        throw new CheckpointException(where + ": needs 'shape' and a two-element 'data_offsets'");
      }
      long[] shape = new long[shapeNode.size()];
      // elements and bytes with exact arithmetic: a shape whose product wraps around 64 bits
      // (e.g. [256, 36028797018963969]) must not pass for a small tensor
      long numel = 1;
      for (int i = 0; i < shape.length; i++) {
        shape[i] = wholeNumber(shapeNode.get(i), where + ": shape " + shapeNode);
        if (shape[i] < 0) throw new CheckpointException(where + ": shape " + shapeNode + " has a negative dimension");
        numel = multiply(numel, shape[i], where + ": shape " + shapeNode);
      }
      long needed = multiply(numel, dtype.bytes, where + ": shape " + shapeNode + " of " + dtypeName);
      long begin = wholeNumber(offs.get(0), where + ": data_offsets " + offs);
      long end = wholeNumber(offs.get(1), where + ": data_offsets " + offs);
      // compared against the data section's size, so no sum here can overflow either
      if (begin < 0 || end < begin || end > dataBytes) {
        throw new CheckpointException(where + ": data_offsets " + offs + " are out of range (data section is "
            + dataBytes + " bytes)");
      }
      if (end - begin != needed) {
        throw new CheckpointException(where + ": data_offsets " + offs + " span " + (end - begin) + " bytes but shape "
            + shapeNode + " of " + dtypeName + " needs " + needed);
      }
      out.put(name, new TensorInfo(path, name, dtype, shape, dataStart + begin, dataStart + end));
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

  /** A JSON integer that fits a long; anything else (1.5, "12", 2^64 + 1) is refused, not rounded. */
  private static long wholeNumber(JsonNode n, String where) {
    if (n == null || !n.isIntegralNumber() || !n.canConvertToLong()) {
      throw new CheckpointException(where + ": " + n + " is not a whole number that fits 64 bits");
    }
    return n.longValue();
  }

  private static long multiply(long a, long b, String where) {
    try {
      return Math.multiplyExact(a, b);
    } catch (ArithmeticException overflow) {
      throw new CheckpointException(where + ": has more elements than any file can hold (the size overflows 64 bits)");
    }
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
          case F8_E4M3: for (int i = 0; i < n; i++) dst[di + i] = DType.e4m3ToFloat(map.get(i)); break;
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
