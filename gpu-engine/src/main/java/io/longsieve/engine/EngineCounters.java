package io.longsieve.engine;

import java.io.Serializable;

/**
 * What an engine's scheduler has done since it opened: how much batching happened and how close
 * the admitted requests came to the memory budget.
 *
 * @param requests             requests that finished or failed after reaching the scheduler
 * @param failed               of those, the ones that failed
 * @param deferredOpens        times a sequence could not be opened for lack of memory while others ran,
 *                             and went back to the queue
 * @param prefillParts         prompt parts (chunks) run
 * @param decodeSteps          decode steps (one forward pass over a batch of sequences)
 * @param batchedDecodeSteps   decode steps with more than one sequence
 * @param decodedTokens        tokens decoded, summed over steps (batch sizes summed)
 * @param peakBatch            largest decode batch
 * @param peakSequences        most requests admitted at once (prefilling or decoding)
 * @param peakKvReservedBytes  most KV bytes reserved at once by admitted requests
 * @param maxBatch             the engine's limit on admitted requests
 * @param kvBudgetBytes        the engine's KV budget; Long.MAX_VALUE: none
 */
public record EngineCounters(
    long requests,
    long failed,
    long deferredOpens,
    long prefillParts,
    long decodeSteps,
    long batchedDecodeSteps,
    long decodedTokens,
    int peakBatch,
    int peakSequences,
    long peakKvReservedBytes,
    int maxBatch,
    long kvBudgetBytes) implements Serializable {

  /** Mean decode batch size; NaN before any decode step. */
  public double meanBatch() {
    return decodeSteps == 0 ? Double.NaN : (double) decodedTokens / decodeSteps;
  }
}
