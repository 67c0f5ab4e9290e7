package io.longsieve.engine;

import io.longsieve.bootstrap.Backends;
import io.longsieve.cpu.CpuRunner;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.engine.spi.Sampler;
import io.longsieve.engine.spi.SamplingParams;
import io.longsieve.model.Checkpoint;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicySpec;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfEnvironmentVariable;

/**
 * CPU figure for continuous batching on the demo model: decode tokens/s for B sequences stepped
 * together ({@link ModelRunner#decodeBatch}) against the same steps one sequence at a time, and
 * engine throughput for B concurrent requests against the same requests one by one. Not a CI test:
 * run with {@code LONGSIEVE_BENCH=1 mvn -pl gpu-engine test -Dtest=BatchingBench}.
 */
class BatchingBench {

  static final Path MODEL = Path.of("../models/longsieve-needle-7m");
  static final int ROUNDS = 5; // best of: the figure is a capability, the host is shared

  @Test
  @EnabledIfEnvironmentVariable(named = "LONGSIEVE_BENCH", matches = ".+")
  void printFigures() {
    int threads = Integer.parseInt(System.getenv().getOrDefault("LONGSIEVE_BENCH_THREADS", "2"));
    System.out.println(run(MODEL, threads, new int[] {1, 4, 8}, 512, 64));
  }

  /** Runs both measurements; one table row per batch size. */
  static String run(Path model, int threads, int[] batches, int promptTokens, int steps) {
    StringBuilder sb = new StringBuilder();
    sb.append(String.format(Locale.ROOT, "model %s, cpu %d threads, prompt %d tokens, %d decode steps%n",
        model.getFileName(), threads, promptTokens, steps));
    sb.append("| B | decode tok/s one at a time | decode tok/s batched | speed-up |"
        + " engine tok/s one by one | engine tok/s concurrent | speed-up |\n");
    for (int b : batches) {
      double[] d = decode(model, threads, b, promptTokens, steps);
      double[] e = engine(model, threads, b, steps);
      sb.append(String.format(Locale.ROOT, "| %d | %.0f | %.0f | %.2fx | %.0f | %.0f | %.2fx |%n", b, d[0], d[1],
          d[1] / d[0], e[0], e[1], e[1] / e[0]));
    }
    return sb.toString();
  }

  /** Runner-level decode tokens/s: {single, batched}, the best of ROUNDS rounds each. */
  static double[] decode(Path model, int threads, int b, int promptTokens, int steps) {
    ModelConfig c = ModelConfig.read(model);
    try (Checkpoint ck = Checkpoint.open(model); CpuRunner runner = new CpuRunner(c, ck, threads, 512)) {
      int vocab = c.vocabSize();
      double bestSingle = 0, bestBatched = 0;
      for (int round = 0; round < ROUNDS; round++) {
        ModelRunner.Sequence[] seqs = new ModelRunner.Sequence[b];
        int[] tokens = new int[b], positions = new int[b], next = new int[b];
        float[][] logits = new float[b][vocab];
        Sampler[] samplers = new Sampler[b];
        SplittableRandom rnd = new SplittableRandom(round);
        for (boolean batched : new boolean[] {false, true}) {
          for (int i = 0; i < b; i++) {
            int[] prompt = new int[promptTokens];
            for (int j = 0; j < promptTokens; j++) prompt[j] = rnd.nextInt(4000);
            seqs[i] = runner.open(promptTokens + steps, PolicySpec.DENSE);
            tokens[i] = seqs[i].prefillNext(prompt, logits[i], samplers[i] = new Sampler(SamplingParams.GREEDY, vocab));
            positions[i] = promptTokens;
          }
          long t = System.nanoTime();
          for (int s = 0; s < steps - 1; s++) {
            if (batched) runner.decodeBatch(seqs, tokens, positions, logits, samplers, next, b);
            else for (int i = 0; i < b; i++) next[i] = seqs[i].decodeNext(tokens[i], positions[i], logits[i], samplers[i]);
            for (int i = 0; i < b; i++) {
              tokens[i] = next[i];
              positions[i]++;
            }
          }
          double tps = (double) b * (steps - 1) / ((System.nanoTime() - t) / 1e9);
          if (batched) bestBatched = Math.max(bestBatched, tps);
          else bestSingle = Math.max(bestSingle, tps);
          for (ModelRunner.Sequence s : seqs) s.close();
        }
      }
      return new double[] {bestSingle, bestBatched};
    }
  }

  /** Engine-level generated tokens/s (prefill included): {one by one, all at once}. */
  static double[] engine(Path model, int threads, int b, int maxNewTokens) {
    List<GenerationRequest> rs = new ArrayList<>();
    for (int i = 0; i < b; i++) {
      rs.add(GenerationRequest.raw("b" + i, "Record " + i + ": the harbour master wrote that the ships "
          + "arrived late because of the storm, and the cargo of grain was counted twice.", maxNewTokens));
    }
    EngineSpec spec = EngineSpec.of(model).withDevice("cpu").withThreads(threads);
    double one = 0, all = 0;
    try (Engine serial = Backends.open(spec.withMaxBatch(1)); Engine batched = Backends.open(spec.withMaxBatch(b))) {
      for (int round = 0; round < ROUNDS; round++) {
        long t = System.nanoTime();
        long n = 0;
        for (GenerationRequest r : rs) n += serial.generate(r).tokenIds().length;
        one = Math.max(one, n / ((System.nanoTime() - t) / 1e9));
        t = System.nanoTime();
        n = 0;
        for (GenerationResult r : batched.generate(rs)) n += r.tokenIds().length;
        all = Math.max(all, n / ((System.nanoTime() - t) / 1e9));
      }
    }
    return new double[] {one, all};
  }
}
