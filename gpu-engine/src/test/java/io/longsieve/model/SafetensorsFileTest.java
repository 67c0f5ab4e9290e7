package io.longsieve.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Handcrafted safetensors headers whose numbers only look consistent: products and sums that wrap
 * around 64 bits, numbers that are not whole or do not fit a long. Each is refused with the file and
 * the tensor named.
 */
class SafetensorsFileTest {

  @TempDir Path dir;

  /** 8-byte length, the header as given, then dataBytes zero bytes. */
  private Path file(String header, int dataBytes) throws IOException {
    byte[] h = header.getBytes(StandardCharsets.UTF_8);
    ByteBuffer b = ByteBuffer.allocate(8 + h.length + dataBytes).order(ByteOrder.LITTLE_ENDIAN);
    b.putLong(h.length).put(h);
    Path f = dir.resolve("model.safetensors");
    Files.write(f, b.array());
    return f;
  }

  private CheckpointException refused(String header, int dataBytes, String... parts) throws IOException {
    Path f = file(header, dataBytes);
    var e = assertThrows(CheckpointException.class, () -> SafetensorsFile.open(f).close());
    assertTrue(e.getMessage().contains("model.safetensors"), e.getMessage());
    for (String p : parts) assertTrue(e.getMessage().contains(p), () -> "'" + p + "' not in: " + e.getMessage());
    return e;
  }

  @Test
  void validTensorOpensAndReads() throws IOException {
    Path f = file("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16);
    try (SafetensorsFile st = SafetensorsFile.open(f)) {
      TensorInfo t = st.tensors().get("w");
      assertEquals(4, t.numel());
      float[] out = new float[4];
      st.readFloats(t, out);
      assertArrayEquals(new float[4], out);
    }
  }

  @Test
  void shapeWhoseElementCountOverflowsIsRefused() throws IOException {
    // 256 × (2^55 + 1) = 2^63 + 256 wraps to a negative long, and × 2 bytes to 512: the old check passed
    refused("{\"w\":{\"dtype\":\"BF16\",\"shape\":[256,36028797018963969],\"data_offsets\":[0,512]}}", 512,
        "'w'", "[256,36028797018963969]", "overflows 64 bits");
  }

  @Test
  void shapeWhoseByteCountOverflowsIsRefused() throws IOException {
    // 2^62 elements fit a long, 2^62 × 4 bytes do not
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]}}", 0,
        "'w'", "F32", "overflows 64 bits");
  }

  @Test
  void negativeDimensionIsRefused() throws IOException {
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1,-4],\"data_offsets\":[0,16]}}", 16, "'w'", "negative dimension");
  }

  @Test
  void dimensionBeyond64BitsIsNotTruncated() throws IOException {
    // 2^64 + 1 read as a long would be 1, which matches 4 bytes of F32
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[18446744073709551617],\"data_offsets\":[0,4]}}", 4,
        "'w'", "not a whole number that fits 64 bits");
  }

  @Test
  void fractionalOrTextualNumbersAreRefused() throws IOException {
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, "'w'", "1.5", "not a whole number");
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[\"0\",4]}}", 4, "'w'", "data_offsets", "not a whole number");
  }

  @Test
  void endOffsetNearLongMaxDoesNotWrapPastTheFileSize() throws IOException {
    // dataStart + end would overflow to a negative number and pass an "end <= file size" test
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[9223372036854775803,9223372036854775807]}}", 4,
        "'w'", "out of range");
  }

  @Test
  void offsetsBeyondTheFileAreRefused() throws IOException {
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8, "'w'", "out of range", "8 bytes");
  }

  @Test
  void sizeThatDisagreesWithDtypeIsRefused() throws IOException {
    // 4 elements of BF16 are 8 bytes, not 16
    refused("{\"w\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16, "'w'", "span 16 bytes", "needs 8");
  }

  @Test
  void tensorEntryThatIsNotAnObjectIsRefused() throws IOException {
    refused("{\"w\":[1,2,3]}", 0, "'w'", "not an object");
    refused("{\"w\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "'w'", "dtype '7'");
  }

  @Test
  void headerLengthFieldsThatLieAreRefused() throws IOException {
    Path f = file("{}", 0);
    byte[] bytes = Files.readAllBytes(f);
    ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).putLong(0, -5);
    Files.write(f, bytes);
    var e = assertThrows(CheckpointException.class, () -> SafetensorsFile.open(f));
    assertTrue(e.getMessage().contains("header length -5"), e.getMessage());
    Files.write(f, new byte[5]);
    e = assertThrows(CheckpointException.class, () -> SafetensorsFile.open(f));
    assertTrue(e.getMessage().contains("too short"), e.getMessage());
  }
}
