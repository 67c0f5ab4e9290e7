package io.longsieve.cli;

import io.longsieve.attention.PolicySpec;
import io.longsieve.engine.Engine;
import io.longsieve.engine.EngineSpec;
import io.longsieve.engine.GenerationRequest;
import io.longsieve.engine.GenerationResult;
import io.longsieve.engine.GenerationStats;
import io.longsieve.engine.SamplingParams;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code longsieve generate}: one prompt through the engine, for trying a model by hand. */
@Command(name = "generate", mixinStandardHelpOptions = true,
    description = "Generate text for one prompt with the engine alone (no Spark).")
public final class GenerateCommand implements Callable<Integer> {

  @Option(names = "--model", required = true, description = "Hugging Face checkpoint folder.")
  Path model;

  @Option(names = "--prompt", required = true, description = "Prompt text (the user message unless --raw).")
  String prompt;

  @Option(names = "--system", description = "System message for the chat template.")
  String system;

  @Option(names = "--raw", description = "No chat template: tokenize the prompt as is (the tokenizer's own special tokens only).")
  boolean raw;

  @Option(names = "--max-new-tokens", defaultValue = "64", description = "Most tokens to generate (default: ${DEFAULT-VALUE}).")
  int maxNewTokens;

  @Option(names = "--temperature", defaultValue = "0", description = "0 is greedy (default); > 0 samples.")
  double temperature;

  @Option(names = "--top-p", defaultValue = "1", description = "Nucleus mass when sampling (default: ${DEFAULT-VALUE}).")
  double topP;

  @Option(names = "--seed", defaultValue = "0", description = "Sampling seed (default: ${DEFAULT-VALUE}).")
  long seed;

  @Option(names = "--stop", description = "Stop string (repeatable).")
  List<String> stop;

  @Option(names = "--policy", defaultValue = "dense",
      description = "Attention policy, e.g. tokenselect or 'tsa + selkv:ratio=0.25 + tokenselect:k=2048' (default: ${DEFAULT-VALUE}).")
  String policy;

  @Option(names = "--prefill", description = "Prefill policy (dense, tokenselect, tsa), replacing that slot of --policy.")
  String prefill;

  @Option(names = "--kv", description = "KV compression (none, selkv, snapkv, h2o, streaming), replacing that slot of --policy.")
  String kv;

  @Option(names = "--decode", description = "Decode policy (dense, tokenselect, quest, streaming), replacing that slot of --policy.")
  String decode;

  @Option(names = "--device", defaultValue = "auto", description = "auto, cpu or cuda (default: ${DEFAULT-VALUE}).")
  String device;

  @Option(names = "--threads", defaultValue = "0", description = "CPU threads; 0 = all cores.")
  int threads;

  @Option(names = "--stats", description = "Print timing and token statistics to stderr.")
  boolean stats;

  @Override
  public Integer call() {
    policy = PolicySpec.compose(policy, prefill, kv, decode);
    EngineSpec spec = EngineSpec.of(model).withDevice(device).withThreads(threads).withDefaultPolicy(policy);
    try (Engine engine = Engine.open(spec)) {
      GenerationRequest r = new GenerationRequest("cli", prompt, system, raw, maxNewTokens,
          new SamplingParams(temperature, topP, seed), stop, policy);
      GenerationResult res = engine.generate(r);
      System.out.println(res.text());
      if (stats) {
        GenerationStats s = res.stats();
        System.err.printf("finish=%s input_tokens=%d output_tokens=%d ttft_ms=%.1f prefill_ms=%.1f decode_ms=%.1f "
                + "decode_tok_s=%.1f backend=%s device=%s policy=%s%n",
            res.finishReason().label(), s.inputTokens(), s.outputTokens(), s.ttftMs(), s.prefillMs(), s.decodeMs(),
            s.outputTokens() > 1 ? (s.outputTokens() - 1) / (s.decodeMs() / 1000) : 0.0, s.backend(), s.device(),
            s.policy());
        System.err.printf("attended_tokens_mean=%.1f selected_fraction_by_layer=%s selection_cache_hit_rate=%.3f "
                + "kv_bytes_before=%d kv_bytes_after=%d sparse_layers=%d selection_ms=%.1f attention_ms=%.1f%n",
            s.attendedTokensMean(), java.util.Arrays.toString(s.selectedFractionByLayer()), s.selectionCacheHitRate(),
            s.kvBytesBefore(), s.kvBytesAfter(), s.sparseLayers(), s.selectionMs(), s.attentionMs());
      }
    }
    return 0;
  }
}
