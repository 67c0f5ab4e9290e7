package io.longsieve.engine;

/**
 * An engine that runs one request at a time on one runner, using all of the runner's resources
 * for that request. Concurrent callers queue on the engine's lock.
 */
final class LocalEngine implements Engine {

  private final LoadedModel model;
  private final ModelRunner runner;
  private final Generator generator;

  LocalEngine(LoadedModel model, ModelRunner runner, int maxContext, String defaultPolicy) {
    this.model = model;
    this.runner = runner;
    this.generator = new Generator(model, runner, maxContext, defaultPolicy);
  }

  @Override
  public LoadedModel model() {
    return model;
  }

  @Override
  public String backend() {
    return runner.backend();
  }

  @Override
  public String device() {
    return runner.device();
  }

  @Override
  public int maxContext() {
    return generator.maxContext();
  }

  @Override
  public synchronized GenerationResult generate(GenerationRequest request) {
    return generator.generate(request);
  }

  @Override
  public synchronized void close() {
    try {
      runner.close();
    } finally {
      model.close();
    }
  }
}
