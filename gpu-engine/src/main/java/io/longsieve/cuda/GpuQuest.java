package io.longsieve.cuda;

import io.longsieve.attention.PolicyTerm;
import io.longsieve.attention.SelectionStats;

/** PLACEHOLDER until its helper's branch lands. */
final class GpuQuest implements GpuParts.Decode {
  GpuQuest(PolicyTerm t, SelectionStats stats, GpuEnv env) {
    throw new UnsupportedOperationException("GpuQuest is not implemented yet");
  }

  @Override public void decode(LayerCall c) {}


}
