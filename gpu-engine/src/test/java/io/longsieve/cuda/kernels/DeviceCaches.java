package io.longsieve.cuda.kernels;

import io.longsieve.cuda.Gpu;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.RopeScaling;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;

/**
 * What the parity tests share to put the same cache on the CPU and on the device: the test model
 * shape, a shuffled page table (so every access goes through the indirection), a layer's device
 * buffers behind it, and the (k, v) row layout the engine's append kernel reads. Each helper draws
 * from the Random it is given exactly what the tests drew inline before, in the same order.
 */
public final class DeviceCaches {
  private DeviceCaches() {}

  /** A Llama-shaped test config (vocab 256, llama3 RoPE scaling so every frequency regime is hit). */
  public static ModelConfig config(int layers, int heads, int kvHeads, int d, int slidingWindow) {
    return new ModelConfig("llama", heads * d, 4 * d, layers, heads, kvHeads, d, 256, 1e-5, 500000,
        new RopeScaling("llama3", 8, 1, 4, 8192), 1 << 20, false, false, slidingWindow, 1, List.of(2));
  }

  /** Pages for slots tokens plus spare unused ones (which the shuffle moves among the used). */
  public static int pages(int slots, int spare) {
    return (slots + Kernels.PAGE_SIZE - 1) / Kernels.PAGE_SIZE + spare;
  }

  /** A permutation of the pages 0..pages−1, drawn by one Collections.shuffle with r. */
  public static int[] shuffledTable(Random r, int pages) {
    List<Integer> perm = new ArrayList<>();
    for (int i = 0; i < pages; i++) perm.add(i);
    Collections.shuffle(perm, r);
    return perm.stream().mapToInt(Integer::intValue).toArray();
  }

  /** n tokens' keys and values (n, kvDim) each as rows (n, 2 * kvDim): k then v, what kv_append reads. */
  public static float[] rows(float[] k, float[] v, int n, int kvDim) {
    float[] kv = new float[n * 2 * kvDim];
    for (int i = 0; i < n; i++) {
      System.arraycopy(k, i * kvDim, kv, i * 2 * kvDim, kvDim);
      System.arraycopy(v, i * kvDim, kv, i * 2 * kvDim + kvDim, kvDim);
    }
    return kv;
  }

  /**
   * Appends n tokens (k, v (n, kvDim) pre-RoPE f32) at slots before.. and positions pos0.. of the
   * view: the engine's kernel writes kPre, kRope (rotated with invFreq) and v in bf16.
   */
  public static void append(Gpu gpu, Kernels.KvView view, float[] k, float[] v, int n, int kvDim, int before, int pos0,
                     DeviceBuffer invFreq) {
    gpu.k.kvAppend(view, gpu.f32(rows(k, v, n, kvDim)).ptr(), 2 * kvDim, 0, kvDim, n, before, pos0, invFreq.ptr());
  }

  /** One layer's device cache behind a page table; kRope and v NaN-poisoned (unwritten slots show). */
  public record Layer(DeviceBuffer kPre, DeviceBuffer kRope, DeviceBuffer v, Kernels.KvView view) {}

  /**
   * Buffers (pages, kvHeads, 64, d) bf16 for table's pages, and the view through table; kPre
   * poisoned too when poisonKPre; bias (slots, query heads) f32 or null.
   */
  public static Layer layer(Gpu gpu, int[] table, int kvHeads, int d, boolean poisonKPre, DeviceBuffer bias) {
    long bytes = (long) table.length * kvHeads * Kernels.PAGE_SIZE * d * 2;
    DeviceBuffer kPre = poisonKPre ? gpu.poisoned(bytes, true) : gpu.alloc(bytes);
    DeviceBuffer kRope = gpu.poisoned(bytes, true), val = gpu.poisoned(bytes, true);
    Kernels.KvView view = new Kernels.KvView(kPre.ptr(), kRope.ptr(), val.ptr(), gpu.ints(table).ptr(), kvHeads, d,
        Kernels.PAGE_SIZE, bias == null ? null : bias.ptr());
    return new Layer(kPre, kRope, val, view);
  }
}
