package io.longsieve.cuda.policy;

import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.ListKernels;
import io.longsieve.cuda.kernels.QuestKernels;
import io.longsieve.cuda.kernels.SelectKernels;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.policy.PolicyTerm;
import io.longsieve.policy.SelectionStats;
import jcuda.driver.CUdeviceptr;

/** StreamingLLM on the GPU: the decode window (the KV eviction part is GpuStreamingEviction). */
public final class GpuStreaming {
  private GpuStreaming() {}

  /**
   * StreamingLLM's decode window (twin: cpu/policy/StreamingLlm.Window): each step attends to the
   * first {@code sinks} slots and the last {@code recent} ones, with positions re-assigned by list
   * index ({@code positions=compact}, the official pos_shift) or original; dense while the cache
   * fits the window. The list is written on the device (no host copy per step). Failure semantics:
   * construction allocates the list, the compact RoPE table and the query buffer (IllegalStateException
   * beyond the memory budget); CUDA errors surface from the launches. Runs inside captured decode
   * steps too ({@link GpuParts.CapturedDecode}): only the list's end moves from step to step.
   */
  public static final class Window implements GpuParts.CapturedDecode {
    private final SelectionStats stats;
    private final GpuEnv env;
    private final int sinks, recent, heads, d;
    private final boolean compact;
    private final ListKernels lists;
    private final QuestKernels qk;
    private final DeviceBuffer list;   // (sinks + recent) int cache slots: sinks ++ recent
    private final DeviceBuffer cos;    // (sinks + recent, headDim / 2) f32 RoPE table by list index; compact only
    private final DeviceBuffer sin;    // (sinks + recent, headDim / 2) f32; compact only
    private final DeviceBuffer qList;  // (1, heads, headDim) bf16 query rotated at list index len - 1; compact only
    private boolean stepDense;         // the planned captured step attends the whole cache
    private final int[] shape = new int[2];  // dense or not, the list attention's scratch generation
    private final ShapeVersion version = new ShapeVersion(shape.length);

    public Window(PolicyTerm t, SelectionStats stats, GpuEnv env) {
      this.stats = stats;
      this.env = env;
      sinks = t.intParam("sinks");
      recent = Math.max(1, t.intParam("recent"));
      compact = t.text("positions").equals("compact");
      heads = env.config().numHeads();
      d = env.config().headDim();
      int len = sinks + recent, half = d / 2;
      qk = new QuestKernels(env.k());
      DeviceBuffer a = null, b = null, c = null, q = null;
      ListKernels lk = null;
      try {
        lk = new ListKernels(env.k(), env.ctx());
        a = env.ctx().alloc(len * 4L, "StreamingLLM window list");
        if (compact) {
          b = env.ctx().alloc((long) len * half * 4, "StreamingLLM RoPE cos");
          c = env.ctx().alloc((long) len * half * 4, "StreamingLLM RoPE sin");
          q = env.ctx().alloc((long) heads * d * 2, "StreamingLLM compact query");
          lk.ropeTable(b.ptr(), c.ptr(), env.invFreq(), len, half);
        }
      } catch (RuntimeException | Error e) {
        for (AutoCloseable x : new AutoCloseable[] {a, b, c, q, lk}) {
          try {
            if (x != null) x.close();
          } catch (Exception ignored) {
            // already failing: keep the first error
          }
        }
        throw e;
      }
      lists = lk;
      list = a;
      cos = b;
      sin = c;
      qList = q;
    }

    @Override
    public void decode(LayerCall c) {
      int layer = c.layer(), n = c.before() + 1, len = sinks + recent;
      if (len >= n) {
        env.k().attention(c.out(), c.q(), c.kv(), 1, heads, c.before(), env.config().window(layer), env.scale(),
            env.ws());
        stats.decode(layer, (double) n * heads, c.pos0() + 1, heads);
        return;
      }
      qk.windowList(list.ptr(), sinks, recent, n);
      attendWindow(c);
      stats.decode(layer, (double) len * heads, c.pos0() + 1, heads);
    }

    /** The window's attention over the list just written. */
    private void attendWindow(LayerCall c) {
      int len = sinks + recent;
      if (compact) {
        // the query sits at the last list index, as the CPU's table.rotate(qr, 0, len - 1)
        env.k().rope(qList.ptr(), c.qPre(), c.qStride(), 1, heads, d, env.invFreq(), null, len - 1);
        lists.attend(c.out(), qList.ptr(), c.kv(), list.ptr(), 1, len, 1, heads, true, cos.ptr(), sin.ptr(),
            env.invFreq(), env.scale());
      } else {
        lists.attend(c.out(), c.q(), c.kv(), list.ptr(), 1, len, 1, heads, false, null, null, null, env.scale());
      }
    }

    /** A captured step: dense or the window, the statistics; only the end moves (sizes[at + STEP_END]). */
    @Override
    public long planStep(PagedKvCache kv, int end, int pos, int[] sizes, int at) {
      int len = sinks + recent;
      sizes[at + SelectKernels.STEP_END] = end;
      boolean dense = len >= end;
      for (int l = 0; l < kv.layers; l++) stats.decode(l, (double) (dense ? end : len) * heads, pos + 1, heads);
      stepDense = dense;
      shape[0] = dense ? 1 : 0;
      shape[1] = (int) lists.generation();
      return version.of(shape);
    }

    @Override
    public boolean stepAttendsDense(int layer) {
      return stepDense;
    }

    @Override
    public void launchStep(LayerCall c, CUdeviceptr step) {
      qk.windowList(list.ptr(), sinks, recent, sinks + recent + 1, step);  // n from the step's plan
      attendWindow(c);
    }

    @Override
    public void close() {
      lists.close();
      list.close();
      if (compact) {
        cos.close();
        sin.close();
        qList.close();
      }
    }
  }
}
