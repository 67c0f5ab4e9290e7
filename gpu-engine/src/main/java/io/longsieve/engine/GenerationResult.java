package io.longsieve.engine;

import java.io.Serializable;

/**
 * What came back for one request.
 *
 * @param id           the request's id
 * @param text         decoded output, special tokens removed, cut before any stop string
 * @param tokenIds     generated token ids (the end-of-sequence token included when it ended so)
 * @param finishReason why generation ended
 * @param stats        timings, sizes and attention statistics
 */
public record GenerationResult(
    String id, String text, int[] tokenIds, FinishReason finishReason, GenerationStats stats)
    implements Serializable {}
