package io.longsieve.cuda;

import io.longsieve.attention.PolicyTerm;
import io.longsieve.attention.SelectionStats;

/** PLACEHOLDER until its helper's branch lands. */
final class GpuTsa implements GpuParts.Prefill {
  GpuTsa(PolicyTerm t, SelectionStats stats, GpuEnv env) {
    throw new UnsupportedOperationException("GpuTsa is not implemented yet");
  }
  @Override public void prefill(LayerCall c) {}


  String layerList() { return ""; }
}
