package io.longsieve.cpu.kernels;

/**
 * Where the attention kernels say which cache slots a query head attended, for attention recall
 * (evaluation only: {@code Engine.drive} with recall positions). A sequence's {@link KvCache} holds one
 * while it is probed ({@link KvCache#attended}); every other run leaves it null and the kernels skip
 * the call. Both kernels every CPU policy ends in report through it (list attention over chosen
 * slots, dense attention over a slot range), so a policy needs no code of its own to be measured;
 * a query head that no kernel ran for (TSA's rows outside their head's list) attended nothing.
 *
 * <p>Calls come from the worker threads of one attention call, each (row, head) from one thread.
 */
public interface AttendedKeys {

  /**
   * Row-head {@code rowHead} (= row of the attention call × numHeads + query head, i.e. the output offset
   * divided by headDim) of {@code layer} attended slots {@code slots[off .. off+count)}.
   */
  void attended(int layer, int rowHead, int[] slots, int off, int count);

  /** As {@link #attended}, for the slot range [from, to). */
  void attendedRange(int layer, int rowHead, int from, int to);
}
