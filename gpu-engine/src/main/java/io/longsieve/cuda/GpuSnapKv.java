package io.longsieve.cuda;

import io.longsieve.attention.PolicyTerm;
import io.longsieve.attention.SelectionStats;

/** PLACEHOLDER until its helper's branch lands. */
final class GpuSnapKv implements GpuParts.Kv {
  GpuSnapKv(PolicyTerm t, SelectionStats stats, GpuEnv env) {
    throw new UnsupportedOperationException("GpuSnapKv is not implemented yet");
  }


  @Override public void compress(PagedKvCache kv) {}

}
