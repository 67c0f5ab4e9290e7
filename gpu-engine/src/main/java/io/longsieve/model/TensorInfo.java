package io.longsieve.model;

import java.nio.file.Path;
import java.util.Arrays;

/**
 * Where one tensor lives in a safetensors file.
 *
 * @param file  the shard holding it
 * @param name  tensor name, e.g. "model.layers.0.self_attn.q_proj.weight"
 * @param dtype element type
 * @param shape dimensions, outermost first
 * @param start absolute byte offset of the first element in the file
 * @param end   absolute byte offset one past the last element
 */
public record TensorInfo(Path file, String name, DType dtype, long[] shape, long start, long end) {

  /** Elements; exact, since {@link SafetensorsFile} refuses shapes whose product overflows. */
  public long numel() {
    long n = 1;
    for (long d : shape) n = Math.multiplyExact(n, d);
    return n;
  }

  public String shapeString() {
    return Arrays.toString(shape);
  }
}
