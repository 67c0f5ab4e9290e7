package io.longsieve.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.longsieve.bootstrap.Backends;
import io.longsieve.engine.Engine;
import io.longsieve.engine.GenerationRequest;
import io.longsieve.engine.GenerationResult;
import io.longsieve.engine.GenerationStats;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.SamplingParams;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.SelectionProbe;
import io.longsieve.policy.PolicyStats;
import io.longsieve.structured.OutputSchema;
import io.longsieve.structured.SchemaException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code longsieve generate}: one prompt through the engine, for trying a model by hand; with
 * {@code --prompt-ids} also the engine side of an end-to-end benchmark (tools/gpu_host/bench_e2e.py):
 * exact token ids in, exactly N tokens out ({@code --ignore-eos}), timings as JSON lines.
 */
@Command(name = "generate", mixinStandardHelpOptions = true,
    description = "Generate text for one prompt with the engine alone (no Spark).")
public final class GenerateCommand implements Callable<Integer> {

  @Mixin
  CheckpointOptions checkpoint;

  @Option(names = "--prompt", description = "Prompt text (the user message unless --raw). Required unless --prompt-ids.")
  String prompt;

  @Option(names = "--prompt-ids", description = "File of whitespace-separated token ids used as the prompt as is (no "
      + "chat template, no BOS added). Repeatable: the prompts run one after another on the same engine.")
  List<Path> promptIds;

  @Option(names = "--system", description = "System message for the chat template.")
  String system;

  @Option(names = "--raw", description = "No chat template: tokenize the prompt as is (the tokenizer's own special tokens only).")
  boolean raw;

  @Option(names = "--max-new-tokens", split = ",", defaultValue = "64",
      description = "Most tokens to generate (default: ${DEFAULT-VALUE}); a list (64,256) runs each prompt once per value.")
  int[] maxNewTokens;

  @Option(names = "--min-new-tokens", defaultValue = "0",
      description = "End-of-sequence ids do not end generation before this many tokens (default: ${DEFAULT-VALUE}).")
  int minNewTokens;

  @Option(names = "--ignore-eos", description = "Generate exactly --max-new-tokens tokens: --min-new-tokens = --max-new-tokens.")
  boolean ignoreEos;

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

  private PolicySpec policySpec; // --policy with --prefill/--kv/--decode, parsed in call()

  @Option(names = "--prefill", description = "Prefill policy (dense, tokenselect, tsa), replacing that slot of --policy.")
  String prefill;

  @Option(names = "--kv", description = "KV compression (none, selkv, snapkv, h2o, streaming), replacing that slot of --policy.")
  String kv;

  @Option(names = "--decode", description = "Decode policy (dense, tokenselect, quest, streaming), replacing that slot of --policy.")
  String decode;

  @Option(names = "--device", defaultValue = "auto", description = "auto, cpu or cuda (default: ${DEFAULT-VALUE}).")
  String device;

  @Option(names = "--prefill-chunk", defaultValue = "" + EngineSpec.DEFAULT_PREFILL_CHUNK,
      description = "Prefill chunk in tokens (default: ${DEFAULT-VALUE}; the CUDA backend takes at least 4096; a TSA "
          + "prefill runs in its own tsa:chunk).")
  int prefillChunk;

  @Option(names = "--warmup-tokens", defaultValue = "0", description = "Before the timed prompts, one untimed request "
      + "on the first N ids of the first prompt with 2 new tokens (module load, first launches); 0 = none.")
  int warmupTokens;

  @Option(names = "--json-schema", description = "A JSON Schema file: the output is a JSON document of it (constrained "
      + "decoding; docs/structured-output.md lists the supported keywords).")
  Path jsonSchema;

  private OutputSchema schema; // --json-schema, parsed once

  @Option(names = "--dump-selections", paramLabel = "DIR", description = "Write every sparse selection of TSA and "
      + "TokenSelect with its inputs to DIR (one run: one prompt, one --max-new-tokens); decode steps run without CUDA "
      + "graphs meanwhile. Input of tools/gpu_host/official_crosscheck.py (docs/sparse-policies.md).")
  Path dumpSelections;

  @Option(names = "--stats", description = "Print timing and token statistics to stderr (and one 'stats_json {...}' line per run).")
  boolean stats;

  @Option(names = "--stats-json", description = "Append one JSON line of timings per run to this file.")
  Path statsJson;

  @Override
  public Integer call() throws IOException {
    if ((prompt == null) == (promptIds == null || promptIds.isEmpty())) {
      System.err.println("generate: give exactly one of --prompt and --prompt-ids");
      return 2;
    }
    for (int n : maxNewTokens) {
      if (n < 0) {
        System.err.println("generate: --max-new-tokens must be >= 0, not " + n);
        return 2;
      }
    }
    if (jsonSchema != null) {
      try {
        schema = OutputSchema.parse(Files.readString(jsonSchema, StandardCharsets.UTF_8));
      } catch (IOException | SchemaException e) {
        System.err.println("generate: --json-schema " + jsonSchema + ": " + e.getMessage());
        return 2;
      }
    }
    List<int[]> idPrompts = new ArrayList<>();
    if (promptIds != null) for (Path p : promptIds) idPrompts.add(readIds(p));
    if (dumpSelections != null && (idPrompts.size() > 1 || maxNewTokens.length > 1 || warmupTokens > 0)) {
      System.err.println("generate: --dump-selections records one run: one prompt, one --max-new-tokens, no --warmup-tokens");
      return 2;
    }
    SelectionDump dump = null;
    if (dumpSelections != null) {
      try {
        dump = new SelectionDump(dumpSelections);
      } catch (IOException e) {
        System.err.println("generate: --dump-selections " + dumpSelections + ": " + e.getMessage());
        return 2;
      }
    }
    policySpec = PolicySpec.compose(policy, prefill, kv, decode); // parsed here, once; typed from here on
    EngineSpec spec = EngineSpec.of(checkpoint.model).withDevice(device).withThreads(checkpoint.threads).withDefaultPolicy(policySpec)
        .withPrefillChunk(prefillChunk);
    try (Engine engine = Backends.open(spec)) {
      if (warmupTokens > 0 && !idPrompts.isEmpty()) {
        int[] first = idPrompts.get(0);
        engine.generate(request(2).withPromptIds(Arrays.copyOf(first, Math.min(warmupTokens, first.length)))
            .withMinNewTokens(2));
      }
      int runs = Math.max(1, idPrompts.size());
      for (int i = 0; i < runs; i++) {
        for (int n : maxNewTokens) {
          GenerationRequest r = request(n);
          if (!idPrompts.isEmpty()) r = r.withPromptIds(idPrompts.get(i));
          GenerationResult res = dump == null ? engine.generate(r) : dumped(engine, r, dump);
          System.out.println(res.text());
          String json = statsJson(res, n, promptIds == null ? null : promptIds.get(i));
          if (stats) printStats(res, json);
          if (statsJson != null) {
            if (statsJson.getParent() != null) Files.createDirectories(statsJson.getParent());
            Files.writeString(statsJson, json + "\n", StandardCharsets.UTF_8, StandardOpenOption.CREATE,
                StandardOpenOption.APPEND);
          }
        }
      }
    }
    return 0;
  }

  /** Runs r with the dump listening, then writes its index (one line on stderr says where and how many). */
  private GenerationResult dumped(Engine engine, GenerationRequest r, SelectionDump dump) throws IOException {
    GenerationResult res;
    SelectionProbe.install(dump);
    try {
      res = engine.generate(r);
    } finally {
      SelectionProbe.install(null);
    }
    int events = dump.finish(checkpoint.model, engine.model().config(), res.stats());
    System.err.println("generate: " + events + " selections with their inputs in " + dumpSelections);
    return res;
  }

  private GenerationRequest request(int maxNew) {
    return new GenerationRequest("cli", prompt == null ? "" : prompt, system, raw, maxNew,
        new SamplingParams(temperature, topP, seed), stop, policySpec).withMinNewTokens(ignoreEos ? maxNew : minNewTokens)
        .withJsonSchema(schema);
  }

  /** Whitespace-separated ints; anything else fails with the file and the offending word. */
  static int[] readIds(Path file) throws IOException {
    String text = Files.readString(file, StandardCharsets.US_ASCII).strip();
    if (text.isEmpty()) throw new IllegalArgumentException(file + ": no token ids");
    String[] words = text.split("\\s+");
    int[] ids = new int[words.length];
    for (int i = 0; i < words.length; i++) {
      try {
        ids[i] = Integer.parseInt(words[i]);
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(file + ": word " + i + " '" + words[i] + "' is not a token id");
      }
    }
    return ids;
  }

  /**
   * One run's timings as a JSON object: prefill_ms (request start to the first token, tokenizing
   * included), decode_ms_per_token (the steps after the first token), total_ms, tokens_per_s
   * (generated tokens / total), and the policy's statistics.
   */
  static String statsJson(GenerationResult res, int maxNew, Path promptFile) {
    GenerationStats s = res.stats();
    ObjectNode o = new ObjectMapper().createObjectNode();
    if (promptFile != null) o.put("prompt_ids", promptFile.toString());
    o.put("input_tokens", s.inputTokens());
    o.put("output_tokens", s.outputTokens());
    o.put("max_new_tokens", maxNew);
    o.put("finish", res.finishReason().label());
    o.put("prefill_ms", s.prefillMs());
    o.put("ttft_ms", s.ttftMs());
    o.put("decode_ms", s.decodeMs());
    o.put("decode_ms_per_token", s.outputTokens() > 1 ? s.decodeMs() / (s.outputTokens() - 1) : Double.NaN);
    o.put("total_ms", s.totalMs());
    o.put("tokens_per_s", s.totalMs() > 0 ? s.outputTokens() / (s.totalMs() / 1000) : Double.NaN);
    o.put("backend", s.backend());
    o.put("device", s.device());
    o.put("policy", s.policy());
    o.put("policy_resolved", s.policyResolved());
    PolicyStats p = s.policyStats();
    o.put("sparse_layers", p.sparseLayers());
    float[] f = p.selectedFractionByLayer();
    double mean = 0;
    for (float v : f) mean += v;
    o.put("selected_fraction_mean", f.length > 0 ? mean / f.length : Double.NaN);
    o.put("selection_ms", p.selectionMs());
    o.put("attention_ms", s.attentionMs());
    return o.toString();
  }

  private static void printStats(GenerationResult res, String json) {
    GenerationStats s = res.stats();
    PolicyStats p = s.policyStats();
    System.err.printf("finish=%s input_tokens=%d output_tokens=%d ttft_ms=%.1f prefill_ms=%.1f decode_ms=%.1f "
            + "decode_tok_s=%.1f backend=%s device=%s policy=%s%n",
        res.finishReason().label(), s.inputTokens(), s.outputTokens(), s.ttftMs(), s.prefillMs(), s.decodeMs(),
        s.outputTokens() > 1 ? (s.outputTokens() - 1) / (s.decodeMs() / 1000) : 0.0, s.backend(), s.device(),
        s.policyResolved());
    System.err.printf("attended_tokens_mean=%.1f selected_fraction_by_layer=%s selection_cache_hit_rate=%.3f "
            + "kv_bytes_before=%d kv_bytes_after=%d sparse_layers=%d selection_ms=%.1f attention_ms=%.1f%n",
        p.attendedTokensMean(), Arrays.toString(p.selectedFractionByLayer()), p.selectionCacheHitRate(),
        s.kvBytesBefore(), p.kvBytesAfter(), p.sparseLayers(), p.selectionMs(), s.attentionMs());
    System.err.println("stats_json " + json);
  }
}
