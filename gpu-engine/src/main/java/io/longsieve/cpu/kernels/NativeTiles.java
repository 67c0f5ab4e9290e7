package io.longsieve.cpu.kernels;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * The hot loops of the CPU backend in C ({@code src/main/c/cpu_tiles.c}, AVX-512), through JNI: a
 * block of {@link Gemm} (prefill rows packed, decode rows in place) and one task of
 * {@link TiledAttention} (prefill over the packed tiles, decode straight from the list). With the
 * library every product and attention tile runs in C, so none of the Vector API tiles has to be
 * compiled by C2 in the middle of a request (JDK 17 ran one of them in C1, boxing every vector, for
 * whole requests when only decode used it). They compute the same fma chains and the same softmax
 * operations as the Java tiles, so the results have the same bits (NativeTilesTest); only the speed
 * differs: on each k step of the 8×32 tile (2 loads, 8 broadcasts, 16 FMAs) JDK 17's C2 adds about 15
 * scalar instructions of index arithmetic, gcc 3 (bench/RESULTS.md, issue 35).
 *
 * <p>Failure behaviour: when the library is missing from the build (no gcc), the machine or OS is
 * another one, the JVM's vectors are not 512 bits wide, loading fails, or
 * {@code -Dlongsieve.cpu.native=false} is set, {@link #AVAILABLE} is false and every caller keeps
 * to the Java tiles; nothing else changes. The arrays are held with GetPrimitiveArrayCritical for the
 * length of one call (a block or a task, milliseconds), during which this thread must not allocate.
 */
final class NativeTiles {
  private NativeTiles() {}

  /** The library's path on the classpath, written by src/main/c/build-cpu-kernels.sh. */
  static final String RESOURCE = "/io/longsieve/cpu/native/linux-x86_64/liblongsieve_cpu.so";

  /** "native" when the library is loaded, else why not (NativeTilesTest reports it when it skips). */
  static final String STATE = load();

  /** Whether the calls below may be made; false keeps every caller on the Java tiles. */
  static final boolean AVAILABLE = STATE.equals("native");

  /** Whether the callers use the library: AVAILABLE, turned off by NativeTilesTest to compare the two paths. */
  static boolean enabled = AVAILABLE;

  private static String load() {
    if (!Boolean.parseBoolean(System.getProperty("longsieve.cpu.native", "true"))) return "off by -Dlongsieve.cpu.native";
    // the C code's layouts: 16-float vectors, panels of 32 columns, key tiles of 64
    if (!CpuOps.VECTOR || Tiles.NR != 32 || TiledAttention.KEY_TILE != 64) return "off: needs 512-bit vectors";
    String arch = System.getProperty("os.arch"), os = System.getProperty("os.name");
    if (!("amd64".equals(arch) || "x86_64".equals(arch)) || !os.toLowerCase().startsWith("linux")) {
      return "off: built for linux-x86_64";
    }
    try (InputStream in = NativeTiles.class.getResourceAsStream(RESOURCE)) {
      if (in == null) return "off: not in this build (no gcc)";
      Path file = Files.createTempFile("liblongsieve_cpu", ".so");
      try {
        Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
        System.load(file.toAbsolutePath().toString());
      } finally {
        Files.deleteIfExists(file); // the loaded mapping outlives the file
      }
      return "native";
    } catch (IOException | UnsatisfiedLinkError | SecurityException e) {
      return "off: " + e.getMessage();
    }
  }

  /**
   * {@code Gemm.block} for rows [r0, r1): x's rows packed into {@code packed} (at least rows · cols
   * floats; null for fewer than {@link Tiles#MR} rows, which are read in place), then panels [p0, p1)
   * of the packed matrix, each {@code width} output columns, into out (row stride outDim) as
   * {@code mode} says, with bias padded to the panels when not null; scratch holds at least rows · NR
   * floats.
   */
  static native void gemmBlock(float[] out, float[] x, int r0, int r1, int outDim, int cols, float[] panels, int p0,
                               int p1, int width, int mode, float[] bias, float[] packed, float[] scratch);

  /**
   * {@code TileWorkspace.attendDirect} after its clamp: rows (positions × heads) over the list entries
   * [first, last), each position's own in [from[i], to[i]); queries q (rows, d) as they are; the list
   * as {@link KvList}'s fields (null index and bias arrays when it has none); vp a value tile's scratch
   * (dPad / NR, KEY_TILE, NR); m, l and o as for {@link #attendPacked}.
   */
  static native void attendDirect(int rows, int heads, int d, int dPad, int first, int last, int[] from, int[] to,
                                  float[] q, float[] keys, int keyBase, int keyStride, int[] keyIdx, int keyIdxOff,
                                  float[] values, int valueBase, int valueStride, int[] valueIdx, int valueIdxOff,
                                  float[] bias, int biasBase, int biasStride, float[] vp, float[] m, float[] l,
                                  float[] o);

  /**
   * {@code TileWorkspace.attendPacked} after its row packing: rows (positions × heads) over the list
   * entries [first, last), each position's own in [from[i], to[i]); queries packed in qp (rows, d); k, v and bias as
   * {@link TiledAttention.PackedTiles} holds them (bias null when the list has none), list entry j0 in
   * tile {@code tileBase + j0 / KEY_TILE}; the running max m, lane sums l (rows, 16) and
   * unnormalised outputs o (rows, dPad) are updated.
   */
  static native void attendPacked(int rows, int heads, int d, int dPad, int first, int last, int[] from, int[] to,
                                  float[] qp, float[] k, float[] v, float[] bias, int tileBase, float[] m, float[] l,
                                  float[] o);
}
