package io.longsieve.cuda;

import io.longsieve.attention.PolicyTerm;
import io.longsieve.attention.SelectionStats;

/** PLACEHOLDER until its helper's branch lands. */
final class GpuStreaming {
  private GpuStreaming() {}

  static final class Eviction implements GpuParts.Kv {
    Eviction(PolicyTerm t, SelectionStats stats, GpuEnv env) {
      throw new UnsupportedOperationException("GpuStreaming.Eviction is not implemented yet");
    }

    @Override
    public void compress(PagedKvCache kv) {}
  }

  static final class Window implements GpuParts.Decode {
    Window(PolicyTerm t, SelectionStats stats, GpuEnv env) {
      throw new UnsupportedOperationException("GpuStreaming.Window is not implemented yet");
    }

    @Override
    public void decode(LayerCall c) {}
  }
}
