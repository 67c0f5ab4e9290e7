package io.longsieve.cuda;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.CudaGraph;
import io.longsieve.cuda.driver.CudaStream;
import io.longsieve.cuda.driver.DeviceAddress;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kernels.SelectKernels;
import io.longsieve.cuda.kv.PagedKvCache;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;

/**
 * The plan of one batched dense decode step, written once per step into device memory and read by
 * every layer's kernels (FlashInfer's plan/run), and the CUDA graphs that replay the step.
 *
 * <p>Per sequence b of the step the host writes, before the step: its token, its position, its
 * cache (page table and page pool, as the {@code DecodeRow} of common/decode_row.cuh), the slot its
 * token goes to, the keys per split of its attention, and its sampling values. One host-to-device
 * copy carries all of it; the kernels of the step take only pointers into this buffer and values
 * fixed for the model, so one captured graph per batch size replays every step: the host then
 * pays one copy, one graph launch and one read-back per step instead of hundreds of launches.
 *
 * <p>A JSON-schema row's pick is held to its token mask: the step's masked flags travel in the plan and
 * the masks of its rows in a buffer of their own, copied only on steps that have a masked row, both at
 * fixed device addresses, so the captured graphs replay schema rows too (no eager path, no host
 * round trip of the logits): the sampling kernel reads each row's flag and mask in place.
 *
 * <p>A row may also decode through a policy whose steps can be captured (TokenSelect: its
 * selection kernels read the sizes that move, one more slot each step, from the row's policy sizes
 * in the same buffer). A graph is keyed by what it bakes in: the batch size, the grid's split
 * count and, per policy row, the policy and its shape version (its buffers and launch shapes); it
 * is captured when a key comes back (a key seen once may never come again), the least
 * recently used of more than {@link #MAX_GRAPHS} is destroyed, and all are dropped when the
 * attention workspace they point into is reallocated. Not thread-safe: the model's one stream.
 */
final class DecodeStep implements AutoCloseable {

  // DecodeRow (common/decode_row.cuh) field by field: byte offsets, and its size (DecodeStepLayoutTest)
  static final int PAGE_TABLE = 0, K_PRE = 8, K_ROPE = 16, V = 24, LAYER_ELEMS = 32, SLOT = 40, POS = 44, CHUNK = 48;
  static final int ROW_BYTES = 56;
  private static final int MAX = CudaModel.MAX_DECODE_BATCH;
  private static final int TOKENS = MAX * ROW_BYTES;   // byte offsets of the regions of the buffer
  private static final int POSITIONS = TOKENS + MAX * 4;
  private static final int SAMPLING = POSITIONS + MAX * 4;
  private static final int SIZES = SAMPLING + MAX * 3 * 4;
  static final int SIZE_INTS = SelectKernels.STEP_INTS;  // a policy row's moving sizes
  private static final int MASKED = SIZES + MAX * SIZE_INTS * 4;
  private static final int BYTES = MASKED + MAX * 4;
  /** Captured graphs kept at most (each holds its kernels' parameters on the device). */
  static final int MAX_GRAPHS = 8;

  // (BYTES) rows (MAX, DecodeRow) | tokens (MAX) int | positions (MAX) int | sampling (MAX, 3) f32 | sizes (MAX, SIZE_INTS) int
  //   | masked (MAX) int: row b's pick is held to its token mask (a JSON-schema request) when not 0
  private final DeviceBuffer dev;
  private final ByteBuffer host = ByteBuffer.allocateDirect(BYTES).order(ByteOrder.LITTLE_ENDIAN);
  // the rows' token masks, (MAX, maskWords) u32, copied only on steps with a masked row: a graph reads them in place
  private final int maskWords;
  private final DeviceBuffer masks;
  private final ByteBuffer maskHost;
  private int maskedRows;  // rows [0, maskedRows) cover every masked row of this step
  private final int[] picked = new int[MAX];
  // a closed graph still in flight is freed when it completes
  private final GraphCache<Key, CudaGraph> graphs = new GraphCache<>(MAX_GRAPHS, CudaGraph::close);
  private final Key probe = new Key(new long[2 + 2 * MAX]);  // this step's key, filled in place
  private int workspaceGeneration = -1;
  private long replays;

  DecodeStep(CudaContext ctx, int vocab) {
    maskWords = Kernels.maskWords(vocab);
    dev = ctx.alloc(BYTES, "decode step plan");
    try {
      masks = ctx.alloc((long) MAX * maskWords * 4, "decode step token masks");
    } catch (RuntimeException e) {
      dev.close();
      throw e;
    }
    maskHost = ByteBuffer.allocateDirect(MAX * maskWords * 4).order(ByteOrder.LITTLE_ENDIAN);
  }

  /**
   * Row b's token mask (bit i of word i / 64: token i allowed), or null for none. Call for every row of
   * the step, in order from row 0, before {@link #upload}.
   */
  void mask(int b, long[] allowed) {
    if (b == 0) maskedRows = 0;
    host.putInt(MASKED + 4 * b, allowed == null ? 0 : 1);
    if (allowed == null) return;
    maskHost.asLongBuffer().put(b * maskWords / 2, allowed, 0, Math.min(allowed.length, maskWords / 2));
    maskedRows = b + 1;
  }

  /**
   * Row b of the step: token id at position pos, appended to kv at slot (its length before the
   * step), attended in splits of chunk keys; sampling with 1/temperature invTemp (0: greedy), topP
   * and the uniform u.
   */
  void row(int b, int token, int pos, PagedKvCache kv, int slot, int chunk, float invTemp, float topP, float u) {
    int at = b * ROW_BYTES;
    Kernels.KvView layer0 = kv.layer(0);
    host.putLong(at + PAGE_TABLE, DeviceAddress.of(layer0.pageTable()));
    host.putLong(at + K_PRE, DeviceAddress.of(layer0.kPre()));
    host.putLong(at + K_ROPE, DeviceAddress.of(layer0.kRope()));
    host.putLong(at + V, DeviceAddress.of(layer0.v()));
    host.putLong(at + LAYER_ELEMS, kv.layerBytes() / 2);  // bf16 elements
    host.putInt(at + SLOT, slot);
    host.putInt(at + POS, pos);
    host.putInt(at + CHUNK, chunk);
    host.putInt(TOKENS + 4 * b, token);
    host.putInt(POSITIONS + 4 * b, pos);
    host.putFloat(SAMPLING + 12 * b, invTemp);
    host.putFloat(SAMPLING + 12 * b + 4, topP);
    host.putFloat(SAMPLING + 12 * b + 8, u);
  }

  /** Row b's policy sizes (SIZE_INTS ints from sizes[at]) for the policy's launches to read on the device. */
  void sizes(int b, int[] sizes, int at) {
    for (int i = 0; i < SIZE_INTS; i++) host.putInt(SIZES + (b * SIZE_INTS + i) * 4, sizes[at + i]);
  }

  /**
   * Starts this step's key: n rows, the grid's split count; then {@link #keyRow} for every row
   * that decodes through a policy (the others are 0: a dense row bakes nothing of its own).
   */
  void keyStart(int n, int splits) {
    Arrays.fill(probe.v, 0);
    probe.v[0] = n;
    probe.v[1] = splits;
  }

  /** Row b decodes through policy id at its shape version. */
  void keyRow(int b, long policy, long version) {
    probe.v[2 + 2 * b] = policy;
    probe.v[3 + 2 * b] = version;
  }

  /** Queues the copy of the step's rows to the device (the host buffer is reused only after {@link #read}). */
  void upload(CudaStream s) {
    s.copyToDevice(dev, 0, Pointer.to(host), BYTES);
    if (maskedRows > 0) s.copyToDevice(masks, 0, Pointer.to(maskHost), (long) maskedRows * maskWords * 4);
  }

  /**
   * Queues the step: the graph captured for this step's key if there is one, else {@code work}
   * itself, after which, when a recent step had the same key, the same work is captured for the
   * next step of that key. Graphs pointing into an older attention workspace are dropped first.
   */
  void run(CudaStream s, int workspaceGeneration, Runnable work) {
    if (workspaceGeneration != this.workspaceGeneration) {
      dropGraphs();
      this.workspaceGeneration = workspaceGeneration;
    }
    CudaGraph g = graphs.get(probe);
    if (g != null) {
      g.launch();
      replays++;
      return;
    }
    work.run();  // this step eagerly: it also raises the kernels' shared-memory limits outside capture
    Key key = new Key(probe.v.clone());
    if (graphs.cameBefore(key)) graphs.put(key, CudaGraph.capture(s, work));
  }

  /** A step's key: n, splits, then (policy, version) per row; compared by value. */
  private record Key(long[] v) {
    @Override
    public boolean equals(Object o) {
      return o instanceof Key k && Arrays.equals(v, k.v);
    }

    @Override
    public int hashCode() {
      return Arrays.hashCode(v);
    }
  }

  /** Waits for the step and returns row b's pick in next[b], b < n. */
  void read(CudaStream s, int n, int[] next) {
    s.copyToHost(Pointer.to(picked), dev, TOKENS, n * 4L);
    s.synchronize();
    System.arraycopy(picked, 0, next, 0, n);
  }

  CUdeviceptr rows() {
    return dev.ptr();
  }

  CUdeviceptr tokens() {
    return dev.at(TOKENS);
  }

  CUdeviceptr positions() {
    return dev.at(POSITIONS);
  }

  CUdeviceptr sampling() {
    return dev.at(SAMPLING);
  }

  CUdeviceptr masks() {
    return masks.ptr();
  }

  CUdeviceptr masked() {
    return dev.at(MASKED);
  }

  int maskWords() {
    return maskWords;
  }

  /** Row b's DecodeRow. */
  CUdeviceptr row(int b) {
    return dev.at((long) b * ROW_BYTES);
  }

  /** Row b's policy sizes (SIZE_INTS int). */
  CUdeviceptr sizes(int b) {
    return dev.at(SIZES + (long) b * SIZE_INTS * 4);
  }

  /** Steps that ran from a captured graph (tests, benchmarks). */
  long replays() {
    return replays;
  }

  int graphCount() {
    return graphs.size();
  }

  private void dropGraphs() {
    graphs.clear();
  }

  @Override
  public void close() {
    dropGraphs();
    dev.close();
    masks.close();
  }
}
