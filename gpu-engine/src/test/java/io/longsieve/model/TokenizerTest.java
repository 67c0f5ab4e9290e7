package io.longsieve.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class TokenizerTest {

  private static final Path NEEDLE_MODEL = Path.of("..", "models", "longsieve-needle-7m");

  @Test
  void aLongTextEncodedTwiceGivesEqualIdsInItsOwnArrays() {
    try (Tokenizer t = Tokenizer.load(NEEDLE_MODEL)) {
      String doc = "The harbour master logged 412 crates before noon. ".repeat(200);
      assertTrue(doc.length() >= Tokenizer.MEMO_MIN_CHARS);
      int[] first = t.encode(doc, true);
      int[] second = t.encode(doc, true);
      assertArrayEquals(first, second);
      assertNotSame(first, second);
      first[0] = -1; // a caller writing into its ids must not change what the next caller gets
      assertArrayEquals(second, t.encode(doc, true));
      // the flag is part of the key: without special tokens the BOS is not there
      int[] plain = t.encode(doc, false);
      assertArrayEquals(plain, t.encode(new String(doc), false));
      assertTrue(plain.length <= second.length);
    }
  }
}
