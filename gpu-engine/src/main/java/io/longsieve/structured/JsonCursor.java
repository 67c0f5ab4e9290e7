package io.longsieve.structured;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;

/**
 * One output's place in its schema's grammar: the mask of the tokens that may come next, the bytes
 * written so far, and whether the document is complete. Not thread-safe: one request's driver.
 */
public final class JsonCursor {

  private final TokenMasks masks;
  private TokenMasks.Entry entry;
  private final ByteArrayOutputStream written = new ByteArrayOutputStream();
  private boolean ended; // an end-of-sequence token was taken

  JsonCursor(TokenMasks masks) {
    this.masks = masks;
    this.entry = masks.start();
  }

  /** Bit i of the (ceil(vocab / 64)) words: token i may come next. Shared with the cache: do not modify. */
  public long[] allowed() {
    return masks.allowed(entry);
  }

  /**
   * Takes a picked token (one {@link #allowed} allows).
   *
   * @throws IllegalStateException for a token the mask does not allow
   */
  public void accept(int token) {
    if (ended) throw new IllegalStateException("the document has ended");
    if (masks.accepting(entry) && isEos(token)) {
      ended = true;
      return;
    }
    entry = masks.advance(entry, token);
    written.writeBytes(masks.vocabulary().bytes(token));
  }

  private boolean isEos(int token) {
    return masks.vocabulary().isEos(token);
  }

  /** Whether the bytes so far are a whole document that nothing can extend, or an end token ended it. */
  public boolean complete() {
    return ended || masks.complete(entry);
  }

  /** Whether the bytes so far are a whole document (an end token may come, or more bytes). */
  public boolean accepting() {
    return masks.accepting(entry);
  }

  /** The JSON text so far (a cut multi-byte character at the end shows as U+FFFD). */
  public String text() {
    return written.toString(StandardCharsets.UTF_8);
  }
}
