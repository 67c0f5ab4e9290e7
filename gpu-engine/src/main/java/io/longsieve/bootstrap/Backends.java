package io.longsieve.bootstrap;

import io.longsieve.cpu.CpuRunner;
import io.longsieve.cuda.CudaAvailability;
import io.longsieve.cuda.GpuVerifiedFamilies;
import io.longsieve.engine.BatchingEngine;
import io.longsieve.engine.Engine;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.model.Checkpoint;
import io.longsieve.policy.PolicyCatalog.Backend;
import java.nio.file.Path;
import java.util.logging.Logger;

/**
 * The one place that wires backends to the engine: chooses and opens the backend a spec asks for
 * and hands its runner to the generation logic. The engine, the CPU and the CUDA backend know only
 * the SPI (io.longsieve.engine.spi), never each other.
 */
public final class Backends {
  private Backends() {}

  private static final Logger LOG = Logger.getLogger(Backends.class.getName());

  /**
   * Opens the model named by the spec on the backend it asks for ("auto": CUDA when usable, the
   * CUDA backend runs the default policy and its path for this model is verified on a GPU
   * ({@link GpuVerifiedFamilies}), else the CPU).
   */
  public static Engine open(EngineSpec spec) {
    LoadedModel model = LoadedModel.load(Path.of(spec.modelDir()));
    try {
      int maxContext = spec.maxContext() > 0 ? spec.maxContext() : model.config().contextLength();
      ModelRunner runner = openRunner(spec, model);
      return new BatchingEngine(model, runner, maxContext, spec.defaultPolicy(), spec.maxBatch(), spec.kvBudgetBytes(),
          spec.prefixCacheBytes());
    } catch (RuntimeException e) {
      model.close();
      throw e;
    }
  }

  /**
   * Device memory the engines of this process hold, from the CUDA backend's own accounting (every
   * allocation passes its budget check): weights, KV caches, workspaces. 0 on the CPU backend.
   */
  public static long deviceMemoryUsedBytes() {
    return CudaAvailability.deviceMemoryUsedBytes();
  }

  private static ModelRunner openRunner(EngineSpec spec, LoadedModel model) {
    String device = spec.device();
    String notOnGpu = spec.defaultPolicy().unsupportedReason(Backend.CUDA);
    if (device.equals("auto") && notOnGpu != null) {
      LOG.info("device auto: using cpu (the CUDA backend does not run " + notOnGpu + ")");
      device = "cpu";
    }
    String unverified = GpuVerifiedFamilies.unverifiedReason(model.config());
    if (device.equals("auto") && unverified != null) {
      LOG.info("device auto: using cpu (" + unverified + "; --device cuda runs it anyway, see docs/models.md)");
      device = "cpu";
    } else if (device.equals("cuda") && unverified != null) {
      LOG.warning("device cuda: " + unverified + " (docs/models.md): results are not yet checked against the CPU on a GPU");
    }
    if (device.equals("cuda") || device.equals("auto")) {
      String why = CudaAvailability.unavailableReason();
      if (why == null) return CudaAvailability.openRunner(spec, model);
      if (device.equals("cuda")) throw new IllegalStateException("device 'cuda' requested but CUDA is unusable: " + why);
      LOG.info("device auto: using cpu (" + why + ")");
    }
    try (Checkpoint ck = Checkpoint.open(model.dir())) {
      return new CpuRunner(model.config(), ck, spec.threads(), spec.prefillChunk(), model.dir());
    }
  }
}
