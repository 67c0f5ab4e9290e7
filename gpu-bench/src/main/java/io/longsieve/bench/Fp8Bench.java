package io.longsieve.bench;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.Fp8Kernels;
import io.longsieve.cuda.kernels.Fp8Matrix;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.model.DType;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.QuantizationConfig.Activations;
import io.longsieve.model.RopeScaling;
import java.util.List;
import java.util.Random;
import jcuda.Pointer;
import jcuda.driver.JCudaDriver;

/**
 * FP8 products on the Llama-3.1-8B and Llama-3.1-70B layer shapes (issue 39): random e4m3 weights and
 * bf16 activations, per-row scales (per token x per channel, as torch._scaled_mm's rowwise scaling) and
 * 128 x 128 weight blocks with 1 x 128 activation groups (DeepSeek-V3's). Rows, per shape:
 * <ul>
 *   <li>{@code fp8 gemm}: the FP8 GEMM alone, activations already quantized (what tools/bench_fp8_peer.py
 *       times for torch._scaled_mm, bf16 out), TFLOP/s against the peer's FP8 matmul ceiling;
 *   <li>{@code fp8 quantize}: the activation quantization alone (bf16 in, e4m3 + scales out);
 *   <li>{@code bf16 gemm}: the bf16 GEMM (Kernels.gemm) on the same shape in the same run, the floor FP8 is
 *       to get under;
 *   <li>{@code fp8 gemv}: the decode GEMV on FP8 weights at 1 and 8 rows, GB/s of weights read against
 *       the copy ceiling (rotating copies of the weights so L2 does not hold them).
 * </ul>
 * Section "fp8" of {@code longsieve bench --fp8}; the peer's keys are "8b qkv rowwise" and so on.
 */
public final class Fp8Bench {
  private Fp8Bench() {}

  /** Llama-3.1-70B's shapes (config.json of meta-llama/Llama-3.1-70B). */
  public static ModelConfig llama3_70b() {
    return new ModelConfig("llama", 8192, 28672, 80, 64, 8, 128, 128256, 1e-5, 500000,
        new RopeScaling("llama3", 8, 1, 4, 8192), 131072, false, false, 0, 128000, List.of(128001));
  }

  /** The four layer products of c: name, n (weight rows), k (inputs). */
  static int[][] shapes(ModelConfig c) {
    int dim = c.hiddenSize(), h = c.intermediateSize();
    return new int[][] {{c.qDim() + 2 * c.kvDim(), dim}, {dim, c.qDim()}, {2 * h, dim}, {dim, h}};
  }

  static final String[] NAMES = {"qkv", "o", "gate_up", "down"};

  /** All rows for m prefill tokens. */
  public static void run(Bench b, int m) {
    CudaContext ctx = b.ctx();
    Kernels k = b.kernels();
    if (!Fp8Kernels.supported(k)) {
      b.log().println("fp8: the FP8 kernels need the sm_90a module on compute capability 9.0; skipped on " + b.device());
      return;
    }
    double fp8Ceiling = b.peerCeiling("fp8_matmul_tflops");
    long maxK = 28672, maxN = 2L * 28672;
    try (Fp8Kernels f = new Fp8Kernels(k, ctx, m, maxK);
         DeviceBuffer a = ctx.alloc((long) m * maxK * 2, "bench A bf16");
         DeviceBuffer qa = ctx.alloc((long) m * maxK, "bench A e4m3");
         DeviceBuffer sa = ctx.alloc((long) m * (maxK / 128) * 4, "bench A scales");
         DeviceBuffer out = ctx.alloc((long) m * maxN * 2, "bench C");
         DeviceBuffer w = ctx.alloc(maxN * maxK, "bench W e4m3");
         DeviceBuffer wb = ctx.alloc(maxN * 8192 * 2, "bench W bf16")) {
      k.fillRandomBf16(a.ptr(), (long) m * maxK, 2, 1f);
      k.fillRandomBf16(wb.ptr(), maxN * 8192, 3, 0.02f);
      fillRandomE4m3(ctx, w, maxN * maxK, 5);
      Random r = new Random(9);
      for (String model : new String[] {"8b", "70b"}) {
        ModelConfig c = model.equals("8b") ? Bench.llama3_8b() : llama3_70b();
        int[][] sh = shapes(c);
        for (int i = 0; i < sh.length; i++) {
          int n = sh[i][0], kk = sh[i][1];
          String shape = m + "x" + n + "x" + kk;
          double flops = 2.0 * m * n * kk;
          for (boolean block : new boolean[] {false, true}) {
            String how = block ? "block128" : "rowwise";
            String key = model + " " + NAMES[i] + " " + how;
            float[] ws = scales(r, block ? (n / 128) * ((kk + 127) / 128) : n);
            try (DeviceBuffer wsd = ctx.alloc(ws.length * 4L, "bench W scales")) {
              wsd.upload(ws);
              Fp8Matrix fw = new Fp8Matrix(w, wsd, block, block ? Activations.DYNAMIC_GROUP : Activations.DYNAMIC_TOKEN, null);
              double qms = b.medianMs(() -> f.quantize(qa.ptr(), sa.ptr(), a.ptr(), m, kk, fw), 3, 15);
              b.add(new Bench.Row("fp8", "quantize " + key, m + "x" + kk, qms, Double.NaN, 3.0 * m * kk / qms / 1e6,
                  Double.NaN, b.peerMs("fp8_quant", key)));
              double ms = b.medianMs(() -> f.gemm(out.ptr(), Kernels.OUT_BF16, qa.ptr(), sa.ptr(), fw, null, m, n, kk), 3, 15);
              double tf = flops / ms / 1e9;
              b.add(new Bench.Row("fp8", "gemm " + key, shape, ms, tf, Double.NaN, tf / fp8Ceiling,
                  b.peerMs("fp8_gemm", key)));
              if (!block) gemv(b, f, fw, a, out, model + " " + NAMES[i], n, kk, maxN * maxK);
            }
          }
          if (kk <= 8192) {  // the bf16 weight buffer holds (2 * 28672, 8192)
            double ms = b.medianMs(() -> k.gemm(out.ptr(), Kernels.OUT_BF16, a.ptr(), wb.ptr(), null, m, n, kk), 3, 15);
            b.add(new Bench.Row("fp8", "bf16 gemm " + model + " " + NAMES[i], shape, ms, flops / ms / 1e9, Double.NaN,
                Double.NaN, b.peerMs("bf16_gemm", model + " " + NAMES[i])));
          }
        }
      }
    }
  }

  private static void gemv(Bench b, Fp8Kernels f, Fp8Matrix fw, DeviceBuffer a, DeviceBuffer out, String name, int n,
                           int kk, long wBytesAll) {
    long wBytes = (long) n * kk;
    int copies = (int) Math.max(1, Math.min(8, wBytesAll / wBytes));
    for (int rows : new int[] {1, 8}) {
      int[] turn = {0};
      double ms = b.medianMs(() -> f.gemv(out.ptr(), Kernels.OUT_BF16, a.ptr(), fw.values().at((turn[0]++ % copies) * wBytes),
          fw.scales().ptr(), false, null, rows, n, kk), 3, 15, 20);
      double gbps = ((double) wBytes + (double) rows * kk * 2 + (double) rows * n * 2) / ms / 1e6;
      b.add(new Bench.Row("fp8", "gemv " + name + " batch " + rows, rows + "x" + n + "x" + kk, ms,
          2.0 * rows * n * kk / ms / 1e9, gbps, gbps / b.copyGbps(), b.peerMs("fp8_gemv", name + " batch " + rows)));
    }
  }

  /** Random finite e4m3 bytes (NaN codes replaced) of a Gaussian's shape, made on the host in 64 MB blocks. */
  static void fillRandomE4m3(CudaContext ctx, DeviceBuffer dst, long n, long seed) {
    Random r = new Random(seed);
    byte[] block = new byte[(int) Math.min(n, 64L << 20)];
    for (int i = 0; i < block.length; i++) block[i] = DType.floatToE4m3((float) (r.nextGaussian() * 64));
    ctx.makeCurrent();
    for (long done = 0; done < n; done += block.length) {
      long len = Math.min(block.length, n - done);
      JCudaDriver.cuMemcpyHtoD(dst.at(done), Pointer.to(block), len);
    }
  }

  private static float[] scales(Random r, int n) {
    float[] s = new float[n];
    for (int i = 0; i < n; i++) s[i] = (float) ((0.5 + r.nextDouble()) / (64 * 90));
    return s;
  }
}
