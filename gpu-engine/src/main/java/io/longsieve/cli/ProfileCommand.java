package io.longsieve.cli;

import io.longsieve.bootstrap.Backends;
import io.longsieve.cpu.CpuModel;
import io.longsieve.cpu.CpuRunner;
import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.cpu.policy.ComposedPolicy;
import io.longsieve.engine.DenseReference;
import io.longsieve.engine.Engine;
import io.longsieve.engine.FidelityMeter;
import io.longsieve.engine.GenerationRequest;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.eval.SuiteItem;
import io.longsieve.eval.SuiteJsonl;
import io.longsieve.eval.TaskPrompts;
import io.longsieve.model.Checkpoint;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.DriftProfile;
import io.longsieve.policy.LayerList;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.SparseLayerProfile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code longsieve profile}: chooses Token Sparse Attention's sparse layers for a model and writes them to
 * {@code <model>/longsieve-sparse-layers.json} (or {@code --out}), which {@code tsa:layers=auto} reads.
 * <ul>
 *   <li>{@code --method kl} (default): for each layer, the KL against dense attention that making that layer
 *       alone sparse costs at the policy's settings, measured along dense attention's greedy continuation of
 *       each calibration document (FidelityMeter); then the layers picked greedily under {@code --kl-budget}
 *       ({@link SparseLayerProfile}).</li>
 *   <li>{@code --method drift}: the paper's rule, layers at or below the δ-quantile of representation drift
 *       ({@link DriftProfile}), on the CPU reference.</li>
 * </ul>
 * Calibration is a text file (repeated up to the token limit, one document, as the official profile repeats
 * its essays) or a suite JSONL ({@code eval-engine --write-suite-only}: each document's prompt as the eval
 * sends it). Documents are no longer than the model's training length: {@code --tokens}, capped by
 * {@code original_max_position_embeddings} of a scaled RoPE, else {@code max_position_embeddings}.
 * Without the file the engine makes the second half of the layers sparse ({@link LayerList}).
 */
@Command(name = "profile", mixinStandardHelpOptions = true,
    description = "Choose Token Sparse Attention's sparse layers (by measured KL against dense, or by drift) and write them.")
public final class ProfileCommand implements Callable<Integer> {

  /**
   * Default KL budget in nats per token. On the bundled needle model (bench/RESULTS.md, "TSA layers by measured
   * fidelity") making layer 5 alone sparse costs 0.0085 and keeps dense accuracy, layer 4 alone 0.14 and costs
   * ten points; 0.02 admits the first and not the second.
   */
  static final double DEFAULT_KL_BUDGET = 0.02;

  @Mixin
  CheckpointOptions checkpoint;

  @Option(names = "--calibration", required = true,
      description = "Calibration: a text file (repeated up to --tokens) or a suite JSONL (eval-engine --write-suite-only).")
  Path calibration;

  @Option(names = "--method", defaultValue = "kl",
      description = "kl: layers chosen greedily under --kl-budget by measured KL against dense; drift: the paper's "
          + "drift quantile (default: ${DEFAULT-VALUE}).")
  String method;

  @Option(names = "--policy", defaultValue = "tsa",
      description = "The TSA policy whose settings are measured (kl; its layers value is replaced) (default: ${DEFAULT-VALUE}).")
  String policy;

  @Option(names = "--kl-budget", defaultValue = "" + DEFAULT_KL_BUDGET,
      description = "Largest mean KL(dense || policy) per token, in nats, of the chosen layers together (default: ${DEFAULT-VALUE}).")
  double klBudget;

  @Option(names = "--tokens", defaultValue = "2048",
      description = "Longest calibration document in tokens, capped by the model's training length (default: ${DEFAULT-VALUE}).")
  int tokens;

  @Option(names = "--new-tokens", defaultValue = "32",
      description = "Steps of dense attention's continuation the KL is measured on (default: ${DEFAULT-VALUE}).")
  int newTokens;

  @Option(names = "--docs", defaultValue = "8", description = "At most this many documents of a JSONL calibration (default: ${DEFAULT-VALUE}).")
  int maxDocs;

  @Option(names = "--delta", defaultValue = "0.5", description = "Drift quantile (drift); layers at or below it are sparse (default: ${DEFAULT-VALUE}).")
  double delta;

  @Option(names = "--out", description = "Output file (default: <model>/" + LayerList.FILE_NAME + ").")
  Path out;

  @Option(names = "--chunk", defaultValue = "0",
      description = "Prefill chunk; 0 (default): the longest calibration document, one chunk per prompt.")
  int chunk;

  @Option(names = "--device", defaultValue = "cpu", description = "cpu, cuda or auto (kl only; default: ${DEFAULT-VALUE}).")
  String device;

  @Override
  public Integer call() throws Exception {
    if (!method.equals("kl") && !method.equals("drift")) throw new IllegalArgumentException("--method must be kl or drift");
    if (!(delta >= 0 && delta <= 1)) throw new IllegalArgumentException("--delta must be in [0, 1]");
    if (!(klBudget >= 0)) throw new IllegalArgumentException("--kl-budget must be >= 0");
    if (tokens < 2 || newTokens < 1 || maxDocs < 1 || chunk < 0) {
      throw new IllegalArgumentException("--tokens must be >= 2, --new-tokens and --docs >= 1, --chunk >= 0");
    }
    if (method.equals("drift") && !device.equals("cpu")) throw new IllegalArgumentException("--method drift runs on the CPU only");
    PolicySpec spec = PolicySpec.parse(policy);
    if (method.equals("kl") && !spec.prefill().name().equals("tsa")) {
      throw new IllegalArgumentException("--policy: the profile measures Token Sparse Attention; its prefill must be tsa, not '"
          + spec.prefill().name() + "'");
    }
    Path model = checkpoint.model;
    try (LoadedModel m = LoadedModel.load(model)) {
      spec.checkAgainst(m.config());
      int limit = Math.min(tokens, trainingLength(m.config()));
      if (limit < tokens) {
        System.err.printf(Locale.ROOT, "profile: --tokens %d is longer than the model's training length; calibrating at %d%n",
            tokens, limit);
      }
      List<int[]> docs = calibrationDocuments(m, limit);
      int longest = docs.stream().mapToInt(d -> d.length).max().orElseThrow();
      Path file = out != null ? out : model.resolve(LayerList.FILE_NAME);
      if (method.equals("drift")) drift(m, model, docs, longest, file);
      else kl(m, model, spec, docs, longest, file);
    }
    return 0;
  }

  /** The model's training length: a llama3, YaRN or LongRoPE scaling's original_max_position_embeddings, else max_position_embeddings. */
  static int trainingLength(ModelConfig c) {
    String type = c.ropeScaling().type();
    boolean scaled = type.equals("llama3") || type.equals("yarn") || type.equals("longrope");
    return scaled && c.ropeScaling().originalMaxPositions() > 0
        ? Math.min(c.ropeScaling().originalMaxPositions(), c.maxPositions()) : c.maxPositions();
  }

  /** Token ids of each calibration document, each at most {@code limit} tokens. */
  List<int[]> calibrationDocuments(LoadedModel m, int limit) throws java.io.IOException {
    if (!calibration.getFileName().toString().endsWith(".jsonl")) {
      return List.of(calibrationTokens(m, Files.readString(calibration), limit));
    }
    List<int[]> docs = new ArrayList<>();
    int skipped = 0;
    TaskPrompts prompts = TaskPrompts.standard();
    for (SuiteItem it : SuiteJsonl.read(calibration)) {
      if (docs.size() == maxDocs) break;
      String text = m.chatTemplate().render(null, prompts.userMessage(it));
      // as the engine tokenizes a chat request: a real template writes the BOS text itself
      int[] ids = m.tokenizer().encode(text, !m.chatTemplate().hasTemplate());
      if (ids.length > limit) skipped++;
      else docs.add(ids);
    }
    if (skipped > 0) System.err.printf(Locale.ROOT, "profile: %d documents longer than %d tokens left out%n", skipped, limit);
    if (docs.isEmpty()) throw new IllegalArgumentException(calibration + ": no document of at most " + limit + " tokens");
    return docs;
  }

  private void kl(LoadedModel m, Path model, PolicySpec spec, List<int[]> docs, int longest, Path file) throws Exception {
    int layers = m.config().numLayers();
    EngineSpec es = EngineSpec.of(model).withDevice(device).withThreads(checkpoint.threads)
        .withPrefillChunk(chunk > 0 ? chunk : longest);
    try (Engine engine = Backends.open(es)) {
      List<GenerationRequest> requests = new ArrayList<>();
      List<DenseReference> refs = new ArrayList<>();
      for (int i = 0; i < docs.size(); i++) {
        GenerationRequest r = GenerationRequest.raw("calibration-" + i, "", newTokens).withPromptIds(docs.get(i));
        requests.add(r);
        refs.add(FidelityMeter.reference(engine, r));
      }
      java.util.function.ToDoubleFunction<boolean[]> measure = mask -> {
        PolicySpec p = SparseLayerProfile.withLayers(spec, mask);
        double sum = 0;
        for (int i = 0; i < requests.size(); i++) sum += FidelityMeter.measure(engine, requests.get(i), p, refs.get(i), 0).klMean();
        return sum / requests.size();
      };
      double[] single = new double[layers];
      for (int l = 0; l < layers; l++) {
        single[l] = measure.applyAsDouble(SparseLayerProfile.only(layers, l));
        System.out.printf(Locale.ROOT, "layer %d alone sparse: KL %.6f%n", l, single[l]);
      }
      SparseLayerProfile.Choice choice = SparseLayerProfile.choose(single, klBudget, measure);
      SparseLayerProfile.write(file, folderName(model), spec, new SparseLayerProfile.Calibration(calibration.toString(),
          docs.size(), longest, newTokens), klBudget, single, choice);
      System.out.println("KL per layer alone: " + Arrays.toString(single));
      System.out.printf(Locale.ROOT, "sparse layers (KL budget %s): %s, KL together %.6f -> %s%n", klBudget, choice.layers(),
          choice.kl(), file);
    }
  }

  private void drift(LoadedModel m, Path model, List<int[]> docs, int longest, Path file) throws Exception {
    try (Checkpoint ck = Checkpoint.open(model);
         CpuRunner runner = new CpuRunner(m.config(), ck, checkpoint.threads, chunk > 0 ? chunk : longest, model)) {
      DriftProfile profile = new DriftProfile(m.config().numLayers());
      CpuModel cpu = runner.model();
      cpu.setLayerObserver(profile::accumulate);
      try {
        for (int[] ids : docs) {
          KvCache kv = cpu.newCache(ids.length);
          cpu.forward(ids, 0, ids.length, 0, kv, ComposedPolicy.of(PolicySpec.DENSE), false,
              new float[m.config().vocabSize()]);
        }
      } finally {
        cpu.setLayerObserver(null);
      }
      double[] drift = profile.drift();
      List<Integer> sparse = DriftProfile.sparseLayers(drift, delta);
      DriftProfile.write(file, folderName(model), calibration.toString(), longest, delta, drift, sparse);
      System.out.println("drift per layer: " + Arrays.toString(drift));
      System.out.println("sparse layers (delta " + delta + "): " + sparse + " -> " + file);
    }
  }

  /** The model folder's name, for the file that lives in it (a full path would not survive a copy). */
  private static String folderName(Path model) {
    return String.valueOf(model.toAbsolutePath().normalize().getFileName());
  }

  /** The text's tokens (with BOS), repeated until {@code n} tokens, as the official profile repeats its essays. */
  static int[] calibrationTokens(LoadedModel m, String text, int n) {
    int[] once = m.tokenizer().encode(text, true);
    if (once.length == 0) throw new IllegalArgumentException("calibration text has no tokens");
    if (once.length >= n) return Arrays.copyOf(once, n);
    int[] body = m.tokenizer().encode(text, false);
    if (body.length == 0) return once;
    int[] ids = Arrays.copyOf(once, n);
    for (int i = once.length; i < n; i++) ids[i] = body[(i - once.length) % body.length];
    return ids;
  }
}
