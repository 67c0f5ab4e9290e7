package io.longsieve.cuda.driver;

import static jcuda.driver.JCudaDriver.cuGraphDestroy;
import static jcuda.driver.JCudaDriver.cuGraphExecDestroy;
import static jcuda.driver.JCudaDriver.cuGraphInstantiate;
import static jcuda.driver.JCudaDriver.cuGraphLaunch;
import static jcuda.driver.JCudaDriver.cuStreamBeginCapture;
import static jcuda.driver.JCudaDriver.cuStreamEndCapture;

import jcuda.driver.CUgraph;
import jcuda.driver.CUgraphExec;
import jcuda.driver.CUstreamCaptureMode;

/**
 * The kernels one call queues on a stream, captured once (stream capture, driver API) and then
 * launched as one unit: one host call replays hundreds of launches with the parameters they had
 * when captured. Whatever must change between launches has to live in device memory.
 *
 * <p>Failure semantics: {@link #capture} throws what the work or the driver threw (work that is
 * illegal while capturing, such as a synchronisation or an allocation, fails the capture) and
 * leaves the stream out of capture mode with nothing queued; a failed {@link #launch} surfaces as
 * {@link jcuda.CudaException} like any launch. Not thread-safe.
 */
public final class CudaGraph implements AutoCloseable {

  private final CudaStream stream;
  private final CUgraph graph;
  private final CUgraphExec exec;
  private boolean closed;

  private CudaGraph(CudaStream stream, CUgraph graph, CUgraphExec exec) {
    this.stream = stream;
    this.graph = graph;
    this.exec = exec;
  }

  /** Captures what {@code work} queues on {@code stream} (nothing runs) and instantiates it. */
  public static CudaGraph capture(CudaStream stream, Runnable work) {
    CUgraph graph = new CUgraph();
    int gpu = stream.context().ordinal();
    try {
      // no engine on this GPU ties the legacy stream or the device to the stream meanwhile (CaptureGuard)
      try (CaptureGuard.Held alone = CaptureGuard.capture(gpu)) {
        captureInto(stream, graph, work);
      }
      CUgraphExec exec = new CUgraphExec();
      try (CaptureGuard.Held sync = CaptureGuard.sync(gpu)) {  // it may allocate on the device
        cuGraphInstantiate(exec, graph, 0);
      }
      return new CudaGraph(stream, graph, exec);
    } catch (RuntimeException | Error e) {
      destroyQuietly(graph);
      throw e;
    }
  }

  /** Begins the capture, runs work, ends it; on a throw, leaves capture mode before rethrowing. */
  private static void captureInto(CudaStream stream, CUgraph graph, Runnable work) {
    // thread-local: only this thread's capture-unsafe calls fail it; other threads' engines go on
    cuStreamBeginCapture(stream.handle(), CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    boolean ended = false;
    try {
      work.run();
      cuStreamEndCapture(stream.handle(), graph);
      ended = true;
    } finally {
      if (!ended) endQuietly(stream, graph);
    }
  }

  private static void endQuietly(CudaStream stream, CUgraph graph) {
    try {
      cuStreamEndCapture(stream.handle(), graph);  // leaves capture mode; the partial graph goes below
    } catch (RuntimeException ignored) {
      // the capture was already invalidated: the stream is out of capture mode either way
    }
  }

  private static void destroyQuietly(CUgraph graph) {
    try {
      cuGraphDestroy(graph);
    } catch (RuntimeException ignored) {
      // no graph was made
    }
  }

  /** Queues the whole captured work on the stream it was captured from. */
  public void launch() {
    cuGraphLaunch(exec, stream.handle());
  }

  @Override
  public void close() {
    if (closed) return;
    closed = true;
    try (CaptureGuard.Held sync = CaptureGuard.sync(stream.context().ordinal())) {  // frees device memory
      cuGraphExecDestroy(exec);
      cuGraphDestroy(graph);
    }
  }
}
