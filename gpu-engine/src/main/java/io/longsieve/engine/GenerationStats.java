package io.longsieve.engine;

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
 * @param attendedTokensMean     mean over decode steps and layers of the tokens attended to
 * @param selectedFractionByLayer per layer, mean attended / available tokens over the request
 * @param selectionCacheHitRate  Selection Cache hits / lookups; NaN where no cache ran
 * @param kvBytesBefore          KV cache bytes after prefill, before compression
 * @param kvBytesAfter           KV cache bytes after compression
 * @param sparseLayers           layers whose prefill attention was sparse
 * @param selectionMs            time spent choosing tokens (scoring, top-k)
 * @param attentionMs            time spent in attention itself
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
    double attendedTokensMean,
    float[] selectedFractionByLayer,
    double selectionCacheHitRate,
    long kvBytesBefore,
    long kvBytesAfter,
    int sparseLayers,
    double selectionMs,
    double attentionMs) implements Serializable {}
