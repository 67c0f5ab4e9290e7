package io.longsieve.cuda;

import io.longsieve.attention.PolicyTerm;
import io.longsieve.attention.SelectionStats;

/** PLACEHOLDER until its helper's branch lands. */
final class GpuTokenSelect implements GpuParts.Prefill, GpuParts.Decode {
  GpuTokenSelect(PolicyTerm t, SelectionStats stats, GpuEnv env) {
    throw new UnsupportedOperationException("GpuTokenSelect is not implemented yet");
  }
  @Override public void prefill(LayerCall c) {}
  @Override public void decode(LayerCall c) {}


}
