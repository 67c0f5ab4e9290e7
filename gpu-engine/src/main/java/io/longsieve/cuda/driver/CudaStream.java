package io.longsieve.cuda.driver;

import static jcuda.driver.JCudaDriver.*;

import jcuda.Pointer;
import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;
import jcuda.driver.CUstream;

/** A CUDA stream of one context, with event-based timing. Destroyed on close. */
public final class CudaStream implements AutoCloseable {

  private final CudaContext ctx;
  private final CUstream stream = new CUstream();
  private boolean closed;

  public CudaStream(CudaContext ctx) {
    this.ctx = ctx;
    ctx.makeCurrent();
    cuStreamCreate(stream, 0);
  }

  public CUstream handle() {
    return stream;
  }

  public CudaContext context() {
    return ctx;
  }

  public void synchronize() {
    cuStreamSynchronize(stream);
  }

  public void copyToDevice(DeviceBuffer dst, long dstOffset, Pointer src, long bytes) {
    cuMemcpyHtoDAsync(dst.at(dstOffset), src, bytes, stream);
  }

  public void copyToHost(Pointer dst, DeviceBuffer src, long srcOffset, long bytes) {
    cuMemcpyDtoHAsync(dst, src.at(srcOffset), bytes, stream);
  }

  /** Queues a device-to-device copy of {@code bytes} from {@code src} to {@code dst}. */
  public void copyOnDevice(jcuda.driver.CUdeviceptr dst, jcuda.driver.CUdeviceptr src, long bytes) {
    cuMemcpyDtoDAsync(dst, src, bytes, stream);
  }

  /** An event recorded now on this stream; close it when read. */
  public Event record() {
    Event e = new Event();
    cuEventRecord(e.event, stream);
    return e;
  }

  /** An ordering event without timing, recorded with {@link #record(Event)} as often as needed. */
  public static Event orderingEvent() {
    return new Event(CUevent_flags.CU_EVENT_DISABLE_TIMING);
  }

  /** Records e at this point of the stream (its last record is what a later {@link #waitFor} waits for). */
  public void record(Event e) {
    cuEventRecord(e.event, stream);
  }

  /** Makes work queued on this stream from now on wait for e's last record, on whichever stream it was. */
  public void waitFor(Event e) {
    cuStreamWaitEvent(stream, e.event, 0);
  }

  /** A recorded point in the stream; {@link #millisSince} waits for it. */
  public static final class Event implements AutoCloseable {
    final CUevent event = new CUevent();

    Event() {
      this(0);
    }

    private Event(int flags) {
      cuEventCreate(event, flags);
    }

    public float millisSince(Event start) {
      cuEventSynchronize(event);
      float[] ms = new float[1];
      cuEventElapsedTime(ms, start.event, event);
      return ms[0];
    }

    @Override
    public void close() {
      cuEventDestroy(event);
    }
  }

  @Override
  public void close() {
    if (closed) return;
    closed = true;
    ctx.makeCurrent();
    cuStreamDestroy(stream);
  }
}
