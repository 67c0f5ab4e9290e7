package io.longsieve.model;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.Random;

/**
 * Runs a bounded number of seeded fuzz cases. Each case must end in a valid result or a clear,
 * checked error (a {@link CheckpointException} or an {@link IllegalArgumentException} with a
 * message); any other exception, an error such as OutOfMemoryError, or a case slower than its time
 * limit fails the test, naming the seed.
 *
 * <p>The seeds are fixed (so CI is repeatable) and each is printed. To replay one case:
 * {@code mvn -pl gpu-engine test -Dtest=SafetensorsFuzzTest -Dlongsieve.fuzz.seed=1000017}. To explore
 * other seeds: {@code -Dlongsieve.fuzz.base=7} (default 1); case i of a run has seed base × 1000000 + i.
 */
final class FuzzCases {
  private FuzzCases() {}

  static final String SEED = "longsieve.fuzz.seed";
  static final String BASE = "longsieve.fuzz.base";

  /** One fuzz case: builds its input from {@code r} and exercises the code under test. */
  interface Case {
    void run(long seed, Random r) throws Exception;
  }

  static void run(String suite, int count, Duration perCase, Case body) {
    String replay = System.getProperty(SEED);
    long base = Long.getLong(BASE, 1L) * 1_000_000L;
    int n = replay != null ? 1 : count;
    for (int i = 0; i < n; i++) {
      long seed = replay != null ? Long.parseLong(replay) : base + i;
      String where = "fuzz " + suite + " seed=" + seed + " (replay: -D" + SEED + "=" + seed + ")";
      assertTimeoutPreemptively(perCase, () -> {
        String outcome = "ok";
        try {
          body.run(seed, new Random(mix(seed)));
        } catch (CheckpointException | IllegalArgumentException expected) {
          String m = expected.getMessage();
          assertFalse(m == null || m.isBlank(), where + ": error without a message: " + expected);
          outcome = "refused: " + (m.length() > 160 ? m.substring(0, 160) + "..." : m);
        } catch (Throwable crash) {
          fail(where + ": " + crash, crash);
        }
        System.out.println("fuzz " + suite + " seed=" + seed + " " + outcome.replace('\n', ' '));
      }, where + ": took longer than " + perCase.toMillis() + " ms");
    }
  }

  /**
   * SplitMix64's finaliser: java.util.Random's first draws from neighbouring seeds are nearly the
   * same (seeds 1000000 to 1000299 all took the same first branch), so each seed is scrambled first.
   */
  static long mix(long seed) {
    long z = seed + 0x9E3779B97F4A7C15L;
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }

  /** Flips {@code flips} random bits of {@code bytes[from, to)}. */
  static void flipBits(byte[] bytes, int from, int to, int flips, Random r) {
    for (int i = 0; i < flips && to > from; i++) bytes[from + r.nextInt(to - from)] ^= (byte) (1 << r.nextInt(8));
  }
}
