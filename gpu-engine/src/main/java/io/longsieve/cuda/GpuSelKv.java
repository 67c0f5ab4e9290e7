package io.longsieve.cuda;

import io.longsieve.attention.PolicyTerm;
import io.longsieve.attention.SelectionStats;

/** PLACEHOLDER until its helper's branch lands. */
final class GpuSelKv implements GpuParts.Kv {
  GpuSelKv(PolicyTerm t, SelectionStats stats, GpuEnv env) {
    throw new UnsupportedOperationException("GpuSelKv is not implemented yet");
  }


  @Override public void compress(PagedKvCache kv) {}

}
