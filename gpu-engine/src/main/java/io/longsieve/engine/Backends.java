package io.longsieve.engine;

import io.longsieve.attention.PolicySpec;
import io.longsieve.cpu.CpuRunner;
import io.longsieve.cuda.CudaAvailability;
import io.longsieve.cuda.GpuPolicy;
import io.longsieve.model.Checkpoint;
import java.nio.file.Path;
import java.util.logging.Logger;

/** Chooses and opens the backend a spec asks for. */
final class Backends {
  private Backends() {}

  private static final Logger LOG = Logger.getLogger(Backends.class.getName());

  static Engine open(EngineSpec spec) {
    PolicySpec.parse(spec.defaultPolicy());
    LoadedModel model = LoadedModel.load(Path.of(spec.modelDir()));
    try {
      int maxContext = spec.maxContext() > 0 ? spec.maxContext() : model.config().maxPositions();
      ModelRunner runner = openRunner(spec, model);
      return new BatchingEngine(model, runner, maxContext, spec.defaultPolicy(), spec.maxBatch(), spec.kvBudgetBytes());
    } catch (RuntimeException e) {
      model.close();
      throw e;
    }
  }

  private static ModelRunner openRunner(EngineSpec spec, LoadedModel model) {
    String device = spec.device();
    String notOnGpu = GpuPolicy.unsupportedReason(PolicySpec.parse(spec.defaultPolicy()));
    if (device.equals("auto") && notOnGpu != null) {
      LOG.info("device auto: using cpu (the CUDA backend does not run " + notOnGpu + ")");
      device = "cpu";
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
