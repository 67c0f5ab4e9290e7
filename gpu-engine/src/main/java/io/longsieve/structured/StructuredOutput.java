package io.longsieve.structured;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/**
 * Structured output for one model: its token vocabulary (read on first use) and the mask caches of
 * the schemas its requests asked for, the most recent {@link #MAX_SCHEMAS} kept. One per engine;
 * thread-safe.
 */
public final class StructuredOutput {

  static final int MAX_SCHEMAS = 32;

  private final Path modelDir;
  private final int vocabSize;
  private final Set<Integer> eosIds;
  private TokenVocabulary vocab; // guarded by this
  private final Map<OutputSchema, TokenMasks> masks = new LinkedHashMap<>(16, 0.75f, true) {
    @Override
    protected boolean removeEldestEntry(Map.Entry<OutputSchema, TokenMasks> eldest) {
      return size() > MAX_SCHEMAS;
    }
  };

  public StructuredOutput(Path modelDir, int vocabSize, Set<Integer> eosIds) {
    this.modelDir = modelDir;
    this.vocabSize = vocabSize;
    this.eosIds = Set.copyOf(eosIds);
  }

  /** For tests and benchmarks: a given vocabulary. */
  public StructuredOutput(TokenVocabulary vocab) {
    this.modelDir = null;
    this.vocabSize = vocab.size();
    this.eosIds = vocab.eos();
    this.vocab = vocab;
  }

  /**
   * A new document under {@code schema}, at its start.
   *
   * @throws IllegalArgumentException when the model's tokenizer is not one structured output reads
   */
  public JsonCursor start(OutputSchema schema) {
    return new JsonCursor(masks(schema));
  }

  /** The mask cache of a schema (compiled on first use). */
  public synchronized TokenMasks masks(OutputSchema schema) {
    TokenMasks m = masks.get(schema);
    if (m == null) {
      m = new TokenMasks(new JsonMatcher(schema.root()), vocabulary());
      masks.put(schema, m);
    }
    return m;
  }

  /** @throws IllegalArgumentException when the tokenizer's decoder is not understood */
  public synchronized TokenVocabulary vocabulary() {
    if (vocab == null) vocab = TokenVocabulary.load(modelDir, vocabSize, eosIds);
    return vocab;
  }
}
