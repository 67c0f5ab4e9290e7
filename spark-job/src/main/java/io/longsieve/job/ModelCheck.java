package io.longsieve.job;

import static io.longsieve.model.WeightNames.ATTN_NORM;
import static io.longsieve.model.WeightNames.BK;
import static io.longsieve.model.WeightNames.BQ;
import static io.longsieve.model.WeightNames.BV;
import static io.longsieve.model.WeightNames.EMBED;
import static io.longsieve.model.WeightNames.FFN_NORM;
import static io.longsieve.model.WeightNames.FINAL_NORM;
import static io.longsieve.model.WeightNames.LM_HEAD;
import static io.longsieve.model.WeightNames.WK;
import static io.longsieve.model.WeightNames.WO;
import static io.longsieve.model.WeightNames.WQ;
import static io.longsieve.model.WeightNames.WV;
import static io.longsieve.model.WeightNames.W_DOWN;
import static io.longsieve.model.WeightNames.W_GATE;
import static io.longsieve.model.WeightNames.W_UP;
import static io.longsieve.model.WeightNames.layer;

import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.structured.TokenVocabulary;
import io.longsieve.model.Checkpoint;
import io.longsieve.model.ModelConfig;
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
 * each weight's shape against config.json (the shapes the engine loads, see {@code CpuWeights}), and
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

  /** The shapes the engine's weight loaders ask for; a tensor missing or of another shape is named. */
  private static void checkShapes(Checkpoint ck, ModelConfig c) {
    long dim = c.hiddenSize(), q = c.qDim(), kv = c.kvDim(), hidden = c.intermediateSize(), vocab = c.vocabSize();
    shape(ck, EMBED, vocab, dim);
    for (int i = 0; i < c.numLayers(); i++) {
      shape(ck, layer(i, ATTN_NORM), dim);
      shape(ck, layer(i, WQ), q, dim);
      shape(ck, layer(i, WK), kv, dim);
      shape(ck, layer(i, WV), kv, dim);
      if (c.attentionBias()) {
        shape(ck, layer(i, BQ), q);
        shape(ck, layer(i, BK), kv);
        shape(ck, layer(i, BV), kv);
      }
      shape(ck, layer(i, WO), dim, q);
      shape(ck, layer(i, FFN_NORM), dim);
      shape(ck, layer(i, W_GATE), hidden, dim);
      shape(ck, layer(i, W_UP), hidden, dim);
      shape(ck, layer(i, W_DOWN), dim, hidden);
    }
    shape(ck, FINAL_NORM, dim);
    if (!c.tieWordEmbeddings() || ck.has(LM_HEAD)) shape(ck, LM_HEAD, vocab, dim);
  }

  private static void shape(Checkpoint ck, String name, long... expected) {
    ck.infoOfShape(name, expected);  // the loaders' own check: names the file and the tensor
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
