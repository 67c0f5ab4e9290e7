package io.longsieve.cuda.kv;

import io.longsieve.cuda.driver.CudaContext;

/**
 * The pages of a kept prompt prefix ({@link PagedKvCache#keep}): its full pages, held by reference
 * in the shared {@link KvPagePool} (the sequence that computed them and every fork hold the same
 * ones), and, when the prefix ends inside a page, a private copy of that last page, which forks copy
 * in turn (the owner of a page with free slots writes into it). Closing drops its holds; a page goes
 * back to the pool when its last holder lets go.
 */
public final class KeptPages implements AutoCloseable {

  private final CudaContext ctx;
  private final KvPagePool pool;
  private final int[] full;    // (tokens / pageSize) pool pages of the full pages, in order
  private final int partial;   // pool page with the last tokens % pageSize slots; -1: none
  private final int tokens;
  private boolean closed;

  KeptPages(CudaContext ctx, KvPagePool pool, int[] full, int partial, int tokens) {
    this.ctx = ctx;
    this.pool = pool;
    this.full = full;
    this.partial = partial;
    this.tokens = tokens;
  }

  public int tokens() {
    return tokens;
  }

  KvPagePool pool() {
    return pool;
  }

  int[] full() {
    return full;
  }

  int partial() {
    return partial;
  }

  /** Device bytes of the pages it holds (shared ones counted whole). */
  public long deviceBytes() {
    return (full.length + (partial >= 0 ? 1 : 0)) * KvPagePool.pageBytes(pool.layers, pool.nKv, pool.headDim);
  }

  @Override
  public void close() {
    if (closed) return;
    closed = true;
    ctx.synchronize();  // a fork's queued copy may still read the partial page
    for (int p : full) pool.give(p);
    if (partial >= 0) pool.give(partial);
  }
}
