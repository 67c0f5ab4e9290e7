package io.longsieve.cuda;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.CudaStream;
import io.longsieve.cuda.kernels.Kernels;
import java.util.function.IntConsumer;

/**
 * The branch streams of a decode step with policy rows ({@link CudaModel#decodeStep}): in a layer,
 * each row whose policy selects runs its selection chain on a branch stream of its own, forked from
 * the model's stream and joined back into it, so the GPU overlaps the rows' small kernels (inside a
 * captured step the branches become parallel paths of the graph); the other rows run meanwhile on
 * the model's stream (they share its attention workspace). Grid-barrier kernels launched in the
 * branches run one at a time (Launcher.onBranch), so that two of them never hold part of the GPU
 * the other needs.
 *
 * <p>Made outside any capture (stream and event creation); not thread-safe: the model's one stream.
 */
final class StepBranches implements AutoCloseable {

  private final Kernels k;
  private final CudaStream[] branches;      // (rows) a row's stream
  private final CudaStream.Event[] joins;   // (rows) the end of a row's branch in the layer
  private final CudaStream.Event fork = CudaStream.orderingEvent();
  private final CudaStream.Event barrierOrder = CudaStream.orderingEvent();

  StepBranches(CudaContext ctx, Kernels k, int rows) {
    this.k = k;
    branches = new CudaStream[rows];
    joins = new CudaStream.Event[rows];
    for (int b = 0; b < rows; b++) {
      branches[b] = new CudaStream(ctx);
      joins[b] = CudaStream.orderingEvent();
    }
  }

  /**
   * Queues attend(b) for rows b < n: on row b's branch where branched[b], else on the model's stream
   * (after the branches are forked, before they are joined). Returns with the model's stream
   * waiting for every branch.
   */
  void run(int n, boolean[] branched, IntConsumer attend) {
    CudaStream main = k.stream();
    main.record(fork);
    main.record(barrierOrder);
    for (int b = 0; b < n; b++) {
      if (!branched[b]) continue;
      int row = b;
      branches[b].waitFor(fork);
      k.onBranch(branches[b], barrierOrder, () -> attend.accept(row));
      branches[b].record(joins[b]);
    }
    for (int b = 0; b < n; b++) if (!branched[b]) attend.accept(b);
    for (int b = 0; b < n; b++) if (branched[b]) main.waitFor(joins[b]);
  }

  @Override
  public void close() {
    k.stream().synchronize();
    for (int b = 0; b < branches.length; b++) {
      branches[b].close();
      joins[b].close();
    }
    fork.close();
    barrierOrder.close();
  }
}
