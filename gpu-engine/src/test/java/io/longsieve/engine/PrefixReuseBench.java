package io.longsieve.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import io.longsieve.bootstrap.Backends;
import io.longsieve.engine.spi.EngineSpec;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfEnvironmentVariable;

/**
 * CPU figures for prefix reuse (issue 36 §6) on the bundled model (longsieve-needle-7m: 6 layers, 256 wide,
 * max_position_embeddings 32768, so 8K-token documents are well inside it): N questions over one document,
 * end to end (tokenizing, prefill, greedy decode of every row, one row after the other as a Spark partition
 * runs them), on an engine with prefix reuse against one without, in the same JVM, alternating, medians of
 * repeats; and the case where no two rows share a document (every row still says it shares its document, so
 * each keeps a prefix nobody reuses: the worst case for reuse). Every row's tokens are checked equal across
 * the two engines. Not a CI test: {@code LONGSIEVE_BENCH=1 mvn -pl gpu-engine test -Dtest=PrefixReuseBench}
 * ({@code LONGSIEVE_BENCH_TOKENS}, {@code _QUESTIONS}, {@code _REPEATS}, {@code _THREADS} change the shape).
 */
class PrefixReuseBench {

  static final Path MODEL = Path.of("../models/longsieve-needle-7m");

  @Test
  @EnabledIfEnvironmentVariable(named = "LONGSIEVE_BENCH", matches = ".+")
  void printFigures() {
    int threads = env("LONGSIEVE_BENCH_THREADS", 2), questions = env("LONGSIEVE_BENCH_QUESTIONS", 8);
    int repeats = env("LONGSIEVE_BENCH_REPEATS", 3);
    EngineSpec spec = EngineSpec.of(MODEL).withDevice("cpu").withThreads(threads);
    StringBuilder sb = new StringBuilder(String.format(Locale.ROOT,
        "model %s, cpu %d threads, %d questions, 16 new tokens each, medians of %d%n", MODEL.getFileName(), threads,
        questions, repeats));
    sb.append("| document tokens | rows | reuse off s | reuse on s | speed-up | tokens reused |\n");
    try (Engine off = Backends.open(spec); Engine on = Backends.open(spec.withPrefixCacheBytes(EngineSpec.PREFIX_CACHE_DEFAULT))) {
      List<Object[]> cases = new ArrayList<>(); // (document tokens, one document?)
      for (String t : System.getenv().getOrDefault("LONGSIEVE_BENCH_TOKENS", "4096,8192").split(",")) {
        cases.add(new Object[] {Integer.parseInt(t.trim()), true});
      }
      for (String t : System.getenv().getOrDefault("LONGSIEVE_BENCH_UNSHARED_TOKENS", "4096").split(",")) {
        if (!t.isBlank()) cases.add(new Object[] {Integer.parseInt(t.trim()), false});
      }
      for (Object[] c : cases) {
        int tokens = (Integer) c[0];
        boolean shared = (Boolean) c[1];
        {
          List<GenerationRequest> rows = rows(off, tokens, questions, shared);
          double[] offS = new double[repeats], onS = new double[repeats];
          long reused = 0;
          for (int r = 0; r < repeats; r++) {
            List<GenerationResult> a = new ArrayList<>(), b = new ArrayList<>();
            offS[r] = time(() -> { for (GenerationRequest q : rows) a.add(off.generate(q)); });
            long before = on.prefixCounters().reusedTokens();
            onS[r] = time(() -> { for (GenerationRequest q : rows) b.add(on.generate(q, shared(on, q, tokens))); });
            reused = on.prefixCounters().reusedTokens() - before;
            on.releasePrefixes("bench");
            for (int i = 0; i < rows.size(); i++) assertArrayEquals(a.get(i).tokenIds(), b.get(i).tokenIds(), "row " + i);
            System.out.printf(Locale.ROOT, "  %d tokens, %s, repeat %d: off %.2f s, on %.2f s%n", tokens,
                shared ? "one document" : "distinct documents", r, offS[r], onS[r]);
          }
          double m0 = median(offS), m1 = median(onS);
          String line = String.format(Locale.ROOT, "| %d | %s | %.2f | %.2f | %.2fx | %d |%n", tokens,
              shared ? questions + " questions, one document" : questions + " documents, one question each", m0, m1,
              m0 / m1, reused);
          System.out.print(line); // as it comes: a long run shows its progress
          sb.append(line);
        }
      }
    }
    System.out.println(sb);
  }

  /** The rows, tokenized: questions over one document, or each over its own (same length). */
  static List<GenerationRequest> rows(Engine e, int tokens, int questions, boolean oneDocument) {
    List<GenerationRequest> out = new ArrayList<>();
    for (int q = 0; q < questions; q++) {
      String doc = document(e, tokens, oneDocument ? 0 : q);
      String prompt = "Answer the question using only the document below. Answer briefly.\n\nDocument:\n" + doc
          + "\n\nQuestion: What is the code of item " + (3 + 7 * q) + "?\nAnswer:";
      out.add(e.prepare(GenerationRequest.chat("q" + q, prompt, 16).withMinNewTokens(16)));
    }
    return out;
  }

  /** About {@code tokens} tokens of filler with numbered facts, different per seed. */
  static String document(Engine e, int tokens, int seed) {
    StringBuilder sb = new StringBuilder();
    String[] w = {"river", "ledger", "council", "harbour", "winter", "station", "market", "bridge", "orchard", "signal"};
    int item = 0;
    while (e.model().tokenizer().encode(sb.toString(), false).length < tokens - 40) {
      for (int i = 0; i < 40; i++) sb.append(w[(i * 7 + seed * 3 + item) % w.length]).append(' ');
      sb.append("The code of item ").append(item).append(" is ").append(1000 + (item * 37 + seed * 11) % 9000).append(". ");
      item++;
    }
    return sb.toString();
  }

  /** What the job tells the engine: the tokens the row shares with its document's head (text before the question). */
  static SharedPrefix shared(Engine e, GenerationRequest r, int tokens) {
    String head = r.prompt().substring(0, r.prompt().indexOf("\n\nQuestion:") + "\n\nQuestion: ".length());
    int[] headIds = e.promptTokens(GenerationRequest.chat(r.id(), head, 1));
    int[] ids = r.promptIds();
    int n = 0;
    while (n < Math.min(ids.length, headIds.length) && ids[n] == headIds[n]) n++;
    return new SharedPrefix(n, "bench");
  }

  static double time(Runnable r) {
    long t0 = System.nanoTime();
    r.run();
    return (System.nanoTime() - t0) / 1e9;
  }

  static double median(double[] v) {
    double[] s = v.clone();
    Arrays.sort(s);
    return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  }

  static int env(String name, int dflt) {
    return Integer.parseInt(System.getenv().getOrDefault(name, Integer.toString(dflt)));
  }
}
