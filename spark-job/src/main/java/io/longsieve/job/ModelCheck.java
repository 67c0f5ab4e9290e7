package io.longsieve.job;

import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.structured.TokenVocabulary;
import io.longsieve.model.Checkpoint;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.TensorPlan;
import io.longsieve.policy.LayerList;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyTerm;
import java.nio.file.Files;
import java.nio.file.Path;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;

/**
 * The model folder and the policy, checked on the driver before Spark starts, by the checks the
 * engine makes when it opens (what {@code longsieve generate} runs, and what every executor would
 * otherwise find one by one, in a long trace, with nothing written): config.json, tokenizer and chat
 * template ({@link LoadedModel#load}), every safetensors header and the index ({@link Checkpoint#open}),
 * each weight's shape against config.json (the shapes the engine loads: {@link TensorPlan}), and
 * the policy's parameters against the model. Reading headers maps the shards but reads no weights.
 */
final class ModelCheck {
  private ModelCheck() {}

  private static final Logger LOG = LogManager.getLogger(ModelCheck.class);

  /**
   * @throws IllegalArgumentException one line naming the file and the field, or the policy parameter
   */
  static void check(RunOptions o) {
    // a model URI (hdfs:, s3a:, file:): in local mode the driver's copy is the executors' too (ModelCache)
    boolean local = o.master().startsWith("local");
    Path dir = Path.of(ModelCache.isUri(o.model()) && local ? ModelCache.localize(o.model(), o.hadoopConfiguration())
        : o.model());
    if (!Files.isDirectory(dir)) {
      // the driver sees the executors' files in local mode; on a cluster the folder may be theirs only
      if (!o.master().startsWith("local")) {
        LOG.info("model folder {} is not visible on the driver; the executors check it when they open it", dir);
        return;
      }
      throw new IllegalArgumentException("model folder " + dir + " does not exist (give --model DIR)");
    }
    if (!Files.isRegularFile(dir.resolve("config.json"))) {
      throw new IllegalArgumentException("model folder " + dir + " has no config.json (give --model DIR)");
    }
    ModelConfig config;
    try (LoadedModel m = LoadedModel.load(dir); Checkpoint ck = Checkpoint.open(dir)) {
      config = m.config();
      checkShapes(ck, config);
      // a run-level JSON schema needs a tokenizer whose tokens' bytes structured output can read
      if (o.generation().jsonSchema() != null) TokenVocabulary.load(dir, config.vocabSize(), m.eosIds());
    } catch (RuntimeException e) {
      throw new IllegalArgumentException("model " + dir + ": " + firstLine(e), e);
    }
    checkPolicy(o.policy(), config, dir);
  }

  /** The shapes the engine's weight loaders ask for (TensorPlan, their one list); a tensor missing or of another shape is named. */
  private static void checkShapes(Checkpoint ck, ModelConfig c) {
    TensorPlan.check(ck, c);  // the loaders' own check: names the file and the tensor
  }

  /**
   * The policy's parameters against the model: the one call site of that check. The engine checks
   * each term's own ranges when the policy is parsed; what needs the model is checked here: the
   * policy's own rule ({@link PolicySpec#checkAgainst}: explicit layer lists and counts such as
   * {@code quest:dense_layers} within numLayers), then every {@code layers=} list resolved as the
   * engine resolves it ({@code layers=auto} reads the model folder).
   */
  static void checkPolicy(PolicySpec spec, ModelConfig config, Path modelDir) {
    try {
      spec.checkAgainst(config);
    } catch (RuntimeException e) {
      throw new IllegalArgumentException("policy " + spec.canonical() + " does not fit model " + modelDir.getFileName()
          + ": " + firstLine(e), e);
    }
    for (PolicyTerm t : new PolicyTerm[] {spec.prefill(), spec.kv(), spec.decode()}) {
      if (t == null || !t.params().containsKey("layers")) continue;
      try {
        LayerList.resolve(t.text("layers"), config.numLayers(), modelDir);
      } catch (RuntimeException e) {
        throw new IllegalArgumentException("policy " + t.canonical() + " does not fit model " + modelDir.getFileName()
            + ": " + firstLine(e), e);
      }
    }
  }

  private static String firstLine(Throwable e) {
    String m = e.getMessage() == null ? e.toString() : e.getMessage();
    int nl = m.indexOf('\n');
    return nl < 0 ? m : m.substring(0, nl);
  }
}
