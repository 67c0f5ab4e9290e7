package io.longsieve.engine;

import io.longsieve.engine.spi.LoadedModel;

/**
 * A request's prompt as token ids: its own ids when it has them, else its text chat-templated unless
 * raw. Here, not on {@link LoadedModel}, because it reads a request and the backend SPI knows no
 * requests.
 */
final class PromptTokens {
  private PromptTokens() {}

  /**
   * The prompt ids of a request that fits: the one context check, for {@link Engine#prepare} and every
   * request the engine runs.
   *
   * @throws PromptTooLongException   when the prompt takes the whole context or more
   * @throws IllegalArgumentException for an empty prompt or a given id outside the vocabulary
   */
  static int[] checked(LoadedModel model, GenerationRequest r, int maxContext) {
    int[] ids = of(model, r);
    if (ids.length == 0) throw new IllegalArgumentException("prompt has no tokens");
    if (ids.length >= maxContext) throw new PromptTooLongException(ids.length, maxContext);
    return ids;
  }

  /** @throws IllegalArgumentException for a given id outside the vocabulary */
  static int[] of(LoadedModel model, GenerationRequest r) {
    int[] given = r.promptIds();
    if (given != null) {
      int vocab = model.config().vocabSize();
      for (int i = 0; i < given.length; i++) {
        if (given[i] < 0 || given[i] >= vocab) {
          throw new IllegalArgumentException("prompt id " + given[i] + " at " + i + " is outside the vocabulary [0, " + vocab + ")");
        }
      }
      return given;
    }
    if (r.raw()) return model.tokenizer().encode(r.prompt(), true);
    String text = model.chatTemplate().render(r.system(), r.prompt());
    // a real template writes the BOS text itself; the plain fallback relies on the tokenizer's own
    return model.tokenizer().encode(text, !model.chatTemplate().hasTemplate());
  }
}
