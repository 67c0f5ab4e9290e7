package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Random;
import org.apache.spark.sql.Row;
import org.junit.jupiter.api.Test;

/**
 * Mutated JSONL rows through the parser: random bytes, truncations, wrong types, huge numbers, deep
 * nesting, template-like text, arrays. Each line must give rows with a status (null = valid so far)
 * and a doc_id, never an exception. Bounded in count and time; the seed is printed, and
 * {@code -Dfuzz.seed=N} replays one.
 */
class DocumentParserFuzzTest {

  private static final int CASES = 20_000;
  private static final long BUDGET_MS = 15_000;

  private static final String[] SEEDS_OF_LINES = {
      "{\"doc_id\":\"d1\",\"task\":\"summary\",\"text\":\"The council met.\"}",
      "{\"doc_id\":7,\"task\":\"qa\",\"text\":\"The school opened in 1998.\",\"question\":\"When?\",\"reference\":\"1998\"}",
      "{\"task\":\"multi_doc_qa\",\"documents\":[{\"title\":\"A\",\"text\":\"x\"},{\"text\":\"y\"}],\"question\":\"Which?\"}",
      "[{\"task\":\"summary\",\"text\":\"one\"},{\"task\":\"summary\",\"text\":\"two\"}]",
  };
  private static final String[] FRAGMENTS = {
      "{{ raise_exception('boom') }}", "{% for i in range(1000) %}w{% endfor %}", "{# c #}", "<|eot_id|>",
      "\\ud800", "\\u0000", "\\udfff\\ud800", "99999999999999999999999999", "-1e999", "1e-999", "null", "true",
      "[]", "{}", "[[[[[[", "]]]]", "\"", "\\", ",", ":", "\"doc_id\":", "\"task\":\"qa\"", "\"documents\":5",
      "\"text\":[1,2]", "\"text\":{\"a\":1}", "NaN", "'single'", "\u00e9\u4e2d\ud83d\ude00",
  };

  @Test
  void everyMutatedLineGivesRowsWithAStatusAndNeverThrows() {
    long seed = Long.getLong("fuzz.seed", System.nanoTime());
    System.out.println("DocumentParserFuzzTest seed " + seed + " (replay with -Dfuzz.seed=" + seed + ")");
    Random rnd = new Random(seed);
    long deadline = System.currentTimeMillis() + BUDGET_MS;
    int n = 0;
    for (; n < CASES && System.currentTimeMillis() < deadline; n++) {
      String line = mutate(rnd, SEEDS_OF_LINES[rnd.nextInt(SEEDS_OF_LINES.length)]);
      List<Row> rows;
      try {
        rows = DocumentParser.parse(line, rnd.nextInt(50) > 0, "fuzz.jsonl", "file:/fuzz.jsonl", n + 1);
      } catch (RuntimeException e) {
        throw new AssertionError("seed " + seed + ", case " + n + ": " + e + " on line: " + line, e);
      }
      if (rows.isEmpty()) fail("seed " + seed + ", case " + n + ": no row for line: " + line);
      for (Row r : rows) {
        assertNotNull(r.getAs("doc_id"), "seed " + seed + ", case " + n);
        String status = r.getAs("status");
        assertTrue(status == null || (status.equals(JobSchemas.BAD_INPUT) && r.getAs("error") != null),
            "seed " + seed + ", case " + n + ": " + r);
      }
    }
    assertTrue(n >= 1000, "at least 1000 cases ran in the budget, " + n + " did (seed " + seed + ")");
  }

  /** One to four edits: a fragment inserted, a cut, random bytes, a value swapped, deep nesting. */
  private static String mutate(Random rnd, String line) {
    StringBuilder sb = new StringBuilder(line);
    int edits = 1 + rnd.nextInt(4);
    for (int e = 0; e < edits; e++) {
      int at = sb.length() == 0 ? 0 : rnd.nextInt(sb.length() + 1);
      switch (rnd.nextInt(6)) {
        case 0 -> sb.insert(at, FRAGMENTS[rnd.nextInt(FRAGMENTS.length)]);
        case 1 -> sb.setLength(at); // truncated object
        case 2 -> {
          byte[] b = new byte[1 + rnd.nextInt(8)];
          rnd.nextBytes(b);
          sb.insert(at, new String(b, StandardCharsets.ISO_8859_1));
        }
        case 3 -> {
          if (at < sb.length()) sb.deleteCharAt(at);
        }
        case 4 -> {
          int i = sb.indexOf("\"text\":\"");
          if (i >= 0) sb.insert(i + 7, FRAGMENTS[rnd.nextInt(FRAGMENTS.length)] + ",\"x\":");
        }
        default -> {
          int depth = rnd.nextInt(3000);
          sb.insert(at, "[".repeat(depth) + "]".repeat(rnd.nextBoolean() ? depth : 0));
        }
      }
    }
    return sb.toString();
  }
}
