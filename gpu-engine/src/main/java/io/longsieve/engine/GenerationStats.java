package io.longsieve.engine;

import io.longsieve.policy.PolicyStats;
import java.io.Serializable;

/**
 * Per-request statistics, written row for row to the job's stats Parquet.
 *
 * @param inputTokens            prompt tokens after templating
 * @param outputTokens           generated tokens
 * @param ttftMs                 request start to the first generated token
 * @param prefillMs              forward pass over the prompt
 * @param decodeMs               all decode steps after the first token
 * @param totalMs                request start to the last token
 * @param backend                "cpu" or "cuda"
 * @param device                 e.g. "cpu:16 threads" or "cuda:0 NVIDIA H200"
 * @param policy                 the attention policy in canonical form, parameters included
 * @param policyResolved         the canonical form with what the backend resolved from the model folder filled
 *                               in, e.g. {@code layers=auto(2-3)} for TSA's sparse layers from the model's profile
 *                               ({@code layers=auto-unprofiled(3-5)}: the fallback without one); equal to policy otherwise
 * @param policyStats            what the policy reported ({@link PolicyStats}: attended tokens, selected fraction
 *                               per layer, cache hit rate, sparse layers), built once by the engine with two
 *                               values it measures itself: {@code kvBytesAfter}, the KV cache bytes right after
 *                               compression, before decode adds tokens (equal to kvBytesBefore when no
 *                               compression ran, never -1), and {@code selectionMs}, the time the prefill's
 *                               attention spent choosing which keys to attend (TSA's proxy scores, cut-off and
 *                               lists): device time on the GPU, wall time on the CPU; decode steps and the KV
 *                               compression after the prefill are not in it
 * @param kvBytesBefore          KV cache bytes after prefill, before compression
 * @param attentionMs            time in the prefill's attention (every layer, the policy's attention and
 *                               its KV observation included) minus the selection time; decode steps are not in
 *                               it on either backend (their attention is part of decodeMs)
 * @param decodeBatchMean        mean number of sequences in the engine's decode steps this request took part
 *                               in (1 when it decoded alone, more when other documents were batched with it;
 *                               NaN without decode steps)
 * @param prefixTokensReused     prompt tokens taken from a kept prefix another request computed instead of
 *                               prefilled (prefix reuse, {@link SharedPrefix}); 0 when none. prefillMs,
 *                               attentionMs and the policy's prefill statistics cover only the rest
 */
public record GenerationStats(
    int inputTokens,
    int outputTokens,
    double ttftMs,
    double prefillMs,
    double decodeMs,
    double totalMs,
    String backend,
    String device,
    String policy,
    String policyResolved,
    PolicyStats policyStats,
    long kvBytesBefore,
    double attentionMs,
    double decodeBatchMean,
    int prefixTokensReused) implements Serializable {

  /** Statistics of a request that reused no prefix. */
  public GenerationStats(int inputTokens, int outputTokens, double ttftMs, double prefillMs, double decodeMs,
                         double totalMs, String backend, String device, String policy, String policyResolved,
                         PolicyStats policyStats, long kvBytesBefore, double attentionMs, double decodeBatchMean) {
    this(inputTokens, outputTokens, ttftMs, prefillMs, decodeMs, totalMs, backend, device, policy, policyResolved,
        policyStats, kvBytesBefore, attentionMs, decodeBatchMean, 0);
  }
}
