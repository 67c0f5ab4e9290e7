package io.longsieve.cli;

import io.longsieve.cpu.CpuModel;
import io.longsieve.cpu.CpuRunner;
import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.cpu.policy.ComposedPolicy;
import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.model.Checkpoint;
import io.longsieve.policy.DriftProfile;
import io.longsieve.policy.LayerList;
import io.longsieve.policy.PolicySpec;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code longsieve profile}: chooses Token Sparse Attention's sparse layers for a model. Runs a
 * calibration document through the CPU reference model (dense attention), measures each layer's
 * representation drift ({@link DriftProfile}) and writes the layers at or below the δ-quantile to
 * {@code <model>/longsieve-sparse-layers.json} (or {@code --out}), which {@code tsa:layers=auto}
 * reads. Without that file the engine makes the second half of the layers sparse
 * ({@link LayerList}).
 */
@Command(name = "profile", mixinStandardHelpOptions = true,
    description = "Profile per-layer representation drift and write Token Sparse Attention's sparse-layer list.")
public final class ProfileCommand implements Callable<Integer> {

  @Mixin
  CheckpointOptions checkpoint;

  @Option(names = "--calibration", required = true,
      description = "Calibration text file (the official profile uses essays with a needle); repeated up to --tokens.")
  Path calibration;

  @Option(names = "--tokens", defaultValue = "8192",
      description = "Calibration tokens, capped by the model's context (default: ${DEFAULT-VALUE}).")
  int tokens;

  @Option(names = "--delta", defaultValue = "0.5", description = "Drift quantile; layers at or below it are sparse (default: ${DEFAULT-VALUE}).")
  double delta;

  @Option(names = "--out", description = "Output file (default: <model>/" + LayerList.FILE_NAME + ").")
  Path out;

  @Option(names = "--chunk", defaultValue = "512", description = "Prefill chunk (default: ${DEFAULT-VALUE}).")
  int chunk;

  @Override
  public Integer call() throws Exception {
    if (!(delta >= 0 && delta <= 1)) throw new IllegalArgumentException("--delta must be in [0, 1]");
    Path model = checkpoint.model;
    try (LoadedModel m = LoadedModel.load(model); Checkpoint ck = Checkpoint.open(model);
         CpuRunner runner = new CpuRunner(m.config(), ck, checkpoint.threads, chunk, model)) {
      int[] ids = calibrationTokens(m, Files.readString(calibration), Math.min(tokens, m.config().contextLength()));
      DriftProfile profile = new DriftProfile(m.config().numLayers());
      CpuModel cpu = runner.model();
      cpu.setLayerObserver(profile::accumulate);
      try {
        KvCache kv = cpu.newCache(ids.length);
        cpu.forward(ids, 0, ids.length, 0, kv, ComposedPolicy.of(PolicySpec.DENSE), false,
            new float[m.config().vocabSize()]);
      } finally {
        cpu.setLayerObserver(null);
      }
      double[] drift = profile.drift();
      List<Integer> sparse = DriftProfile.sparseLayers(drift, delta);
      Path file = out != null ? out : model.resolve(LayerList.FILE_NAME);
      DriftProfile.write(file, model.toString(), calibration.toString(), ids.length, delta, drift, sparse);
      System.out.println("drift per layer: " + Arrays.toString(drift));
      System.out.println("sparse layers (delta " + delta + "): " + sparse + " -> " + file);
    }
    return 0;
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
