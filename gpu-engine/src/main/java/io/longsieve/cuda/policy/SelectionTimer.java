package io.longsieve.cuda.policy;

import io.longsieve.cuda.driver.CudaStream;
import io.longsieve.policy.SelectionStats;
import java.util.ArrayList;
import java.util.List;

/**
 * Device time of a policy's selection kernels during the prefill, for selection_ms: a pair of events
 * around each span, read when the stats are collected (after the work ran), so timing adds no
 * synchronisation. A host clock around queued kernels measures either their launches (no sync) or
 * everything queued before them as well (a sync): TSA's selection_ms read 27.6 s of a 30.0 s 128K
 * prefill that way. Not thread-safe: one sequence.
 */
final class SelectionTimer implements AutoCloseable {

  private final CudaStream stream;
  private final List<CudaStream.Event[]> spans = new ArrayList<>();

  SelectionTimer(CudaStream stream) {
    this.stream = stream;
  }

  /** Marks the start of a span in the stream's order. */
  CudaStream.Event start() {
    return stream.record();
  }

  /** Marks the end of the span {@code start} began. */
  void stop(CudaStream.Event start) {
    spans.add(new CudaStream.Event[] {start, stream.record()});
  }

  /** Adds the spans' device time to {@code stats.selectionNanos}, waiting for them, and frees their events. */
  void collect(SelectionStats stats) {
    for (CudaStream.Event[] s : spans) {
      stats.selectionNanos += Math.round(s[1].millisSince(s[0]) * 1e6);
      s[0].close();
      s[1].close();
    }
    spans.clear();
  }

  @Override
  public void close() {
    for (CudaStream.Event[] s : spans) {
      s[0].close();
      s[1].close();
    }
    spans.clear();
  }
}
