package io.longsieve.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** The list benchmark's synthetic lists (host only, no GPU). */
class ListAttentionBenchTest {

  @ParameterizedTest
  @CsvSource({"2688", "2689", "32768", "131072"})
  void benchListsAreSortedDistinctSlotsOfTheContext(int context) {
    int[] l = ListAttentionBench.list(new Random(context), context);
    assertEquals(ListAttentionBench.LIST, l.length);
    assertEquals(0, l[0]);
    assertEquals(context - 1, l[l.length - 1], "the window ends at the last slot");
    for (int i = 1; i < l.length; i++) assertTrue(l[i] > l[i - 1], "strictly ascending at " + i);
  }
}
