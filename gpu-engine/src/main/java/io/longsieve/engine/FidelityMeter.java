package io.longsieve.engine;

import io.longsieve.engine.spi.Sampler;
import io.longsieve.policy.PolicySpec;
import java.util.Arrays;
import java.util.Set;
import java.util.TreeSet;

/**
 * Fidelity of a policy against dense attention on one prompt, independent of the model's skill at the
 * task (docs/fidelity.md):
 * <ol>
 *   <li>{@link #reference}: dense attention decodes greedily (up to the request's maxNewTokens, to and
 *       including an end-of-sequence id) and keeps every step's logits: one driven run;</li>
 *   <li>{@link #measure}: the policy runs the same prompt and is fed the same tokens (teacher forcing),
 *       so at step i both have seen exactly the same text; per step KL(dense ‖ policy) of the next-token
 *       distributions, whether the two top-1 tokens agree, and the first step where they do not: one
 *       more driven run per policy. Optionally attention recall at a few prompt and decode positions.</li>
 * </ol>
 * Cost per document: one dense run (prompt + N−1 steps), shared by every policy, and one run per policy
 * (prompt + N−1 steps), each alone on the device; logits reach the host every step.
 */
public final class FidelityMeter {
  private FidelityMeter() {}

  /**
   * Dense attention's greedy continuation of {@code r}'s prompt with its logits ({@code r}'s policy,
   * sampling and stop strings are ignored; its maxNewTokens bounds the continuation).
   */
  public static DenseReference reference(Engine engine, GenerationRequest r) {
    int vocab = engine.model().config().vocabSize();
    Set<Integer> eos = engine.model().eosIds();
    int limit = Math.max(1, r.maxNewTokens());
    int[] tokens = new int[limit];
    float[][] logits = new float[limit][];
    int[] n = {0};
    DrivenRun run = engine.drive(r.withPolicy(PolicySpec.DENSE), (step, l) -> {
      int t = Sampler.argmax(l, vocab);
      tokens[step] = t;
      logits[step] = l.clone();
      n[0] = step + 1;
      return eos.contains(t) ? -1 : t;
    }, null);
    return new DenseReference(run.promptTokens(), Arrays.copyOf(tokens, n[0]), Arrays.copyOf(logits, n[0]));
  }

  /**
   * {@code policy} teacher-forced along {@code ref} on {@code r}'s prompt.
   *
   * @param recallPoints prompt positions and decode positions (each) where attention recall is measured, spread
   *     evenly (the prompt's last position included); 0 for none
   * @throws UnsupportedOperationException when recall is asked of a backend that cannot measure it
   */
  public static Fidelity measure(Engine engine, GenerationRequest r, PolicySpec policy, DenseReference ref,
                                 int recallPoints) {
    int vocab = engine.model().config().vocabSize();
    int steps = ref.steps();
    double[] kl = new double[steps];
    int[] agree = {0};
    int[] first = {-1};
    int[] seen = {0};
    int[] positions = recallPoints > 0 ? recallPositions(ref.promptTokens(), steps, recallPoints) : null;
    DrivenRun run = engine.drive(r.withPolicy(policy).withMaxNewTokens(steps), (step, logits) -> {
      kl[step] = kl(ref.logits()[step], logits, vocab);
      if (Sampler.argmax(logits, vocab) == ref.tokens()[step]) agree[0]++;
      else if (first[0] < 0) first[0] = step;
      seen[0] = step + 1;
      return step + 1 < steps ? ref.tokens()[step] : -1;
    }, positions);
    if (run.promptTokens() != ref.promptTokens() || seen[0] != steps) {
      throw new IllegalStateException("the policy's run saw " + seen[0] + " steps of a " + run.promptTokens()
          + "-token prompt; the dense reference has " + steps + " of " + ref.promptTokens());
    }
    double sum = 0, max = 0;
    for (double k : kl) {
      sum += k;
      max = Math.max(max, k);
    }
    return new Fidelity(steps, sum / steps, max, (double) agree[0] / steps, first[0], run.recall());
  }

  /**
   * KL(softmax(p) ‖ softmax(q)) in nats over the first {@code vocab} logits, in double: the same
   * log-softmax for both sides, so identical logits give exactly 0.
   */
  public static double kl(float[] p, float[] q, int vocab) {
    double lseP = logSumExp(p, vocab), lseQ = logSumExp(q, vocab);
    double kl = 0;
    for (int i = 0; i < vocab; i++) {
      double lp = p[i] - lseP;
      double prob = Math.exp(lp);
      if (prob > 0) kl += prob * (lp - (q[i] - lseQ));
    }
    return Math.max(0, kl); // rounding may leave -1e-17 where the distributions agree
  }

  private static double logSumExp(float[] x, int n) {
    double m = Double.NEGATIVE_INFINITY;
    for (int i = 0; i < n; i++) m = Math.max(m, x[i]);
    double s = 0;
    for (int i = 0; i < n; i++) s += Math.exp(x[i] - m);
    return m + Math.log(s);
  }

  /**
   * Query positions probed for recall, ascending: {@code points} prompt positions spread evenly, the last
   * prompt position among them, and up to {@code points} positions of fed continuation tokens (the teacher-forced
   * decode steps, positions promptTokens .. promptTokens + steps − 2), spread the same way.
   */
  static int[] recallPositions(int promptTokens, int steps, int points) {
    Set<Integer> p = new TreeSet<>();
    for (int k = 1; k <= points; k++) p.add((int) Math.round((double) k * promptTokens / points) - 1);
    int fed = steps - 1;
    for (int k = 1; k <= points && fed > 0; k++) p.add(promptTokens + (int) Math.round((double) k * fed / points) - 1);
    p.remove(-1);
    return p.stream().mapToInt(Integer::intValue).toArray();
  }
}
