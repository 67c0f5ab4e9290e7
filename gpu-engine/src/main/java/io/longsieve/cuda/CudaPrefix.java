package io.longsieve.cuda;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.kv.KeptPages;
import io.longsieve.cuda.policy.GpuParts;
import io.longsieve.engine.spi.ModelRunner;

/**
 * A kept prompt prefix on the device (prefix reuse): its pages in the runner's shared pool (full pages
 * held by reference, the partial last one a private copy) and the policy's state at its end. Closing
 * drops its holds and frees the state, on the thread that drives the runner.
 */
final class CudaPrefix implements ModelRunner.KeptPrefix {
  private final CudaContext ctx;
  private final KeptPages pages;
  private final GpuParts.KeptState state;  // null: the policy keeps none

  CudaPrefix(CudaContext ctx, KeptPages pages, GpuParts.KeptState state) {
    this.ctx = ctx;
    this.pages = pages;
    this.state = state;
  }

  KeptPages pages() {
    return pages;
  }

  GpuParts.KeptState state() {
    return state;
  }

  @Override
  public int tokens() {
    return pages.tokens();
  }

  @Override
  public long bytes() {
    return pages.deviceBytes() + (state == null ? 0 : state.bytes());
  }

  @Override
  public void close() {
    ctx.makeCurrent();
    try {
      pages.close();
    } finally {
      if (state != null) state.close();
    }
  }
}
