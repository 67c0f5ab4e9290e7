package io.longsieve.eval;

import io.longsieve.engine.spi.EngineSpec;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import picocli.CommandLine.Option;

/** The eval commands' shared options (a picocli mixin): what to run, on which model, where to write. */
public final class EvalOptions {

  /** Every policy the quality issue asks for, sized for a model trained at 2K tokens. */
  public static final List<String> STANDARD_POLICIES = List.of(
      "dense",
      "tokenselect:k_frac=0.05,sinks=16,window=64",
      "tokenselect:k_frac=0.1,sinks=16,window=64",
      "tokenselect:k_frac=0.2,sinks=16,window=64",
      "tokenselect",
      "tsa",
      "selkv:ratio=0.25",
      "tsa + selkv:ratio=0.25 + tokenselect:k_frac=0.1,sinks=16,window=64",
      "streaming:sinks=4,recent=256",
      "snapkv:ratio=0.25",
      "h2o",
      "quest:budget=256");
  /** A CI-sized pair. */
  public static final List<String> CI_POLICIES = List.of("dense", "tokenselect:k_frac=0.1,sinks=16,window=64");

  @Option(names = "--model", required = true, description = "Hugging Face checkpoint folder.")
  public Path model;

  @Option(names = "--output", required = true, description = "Output root; results go to <output>/eval/.")
  public Path output;

  @Option(names = "--suite", description = "JSONL of documents with expected answers (job input format plus "
      + "'expected'/'kind'); default: generate a seeded suite.")
  public Path suite;

  @Option(names = "--held-out", description = "Build every task from the held-out family (suite-heldout.json: needle "
      + "phrasings, questions and haystack kinds the model never trained on); doc ids start with 'heldout-'.")
  public boolean heldOut;

  @Option(names = "--tasks", split = ",", description = "Suite tasks to generate (default: all: ${DEFAULT-VALUE}).",
      defaultValue = "niah_single,niah_multikey,niah_multivalue,niah_multiquery,vt,mdqa,summary")
  public List<String> tasks;

  @Option(names = "--lengths", split = ",", defaultValue = "1,2,4,8",
      description = "Multiples of the training length (default: ${DEFAULT-VALUE}).")
  public List<Integer> lengths;

  @Option(names = "--train-length", defaultValue = "2048", description = "The model's training length in tokens (default: ${DEFAULT-VALUE}).")
  public int trainLength;

  @Option(names = "--per-cell", defaultValue = "4", description = "Documents per task and length, depths spread evenly (default: ${DEFAULT-VALUE}).")
  public int perCell;

  @Option(names = "--seed", defaultValue = "6", description = "Suite seed (default: ${DEFAULT-VALUE}). A cell's i-th "
      + "document is written from seed + i (its needle at depth (i + 0.5) / per-cell), so runs meant to be combined "
      + "(tools/combine_eval_runs.py) need seeds at least --per-cell apart, or they share documents' text.")
  public long seed;

  @Option(names = "--policy", description = "A policy to run (repeatable; policy strings may contain commas).")
  public List<String> policy = new ArrayList<>();

  @Option(names = "--policies", description = "'standard' (every policy of the quality issue), 'ci' (dense and one "
      + "TokenSelect), or policies separated by ';'.")
  public String policies;

  @Option(names = "--max-new-tokens", defaultValue = "0",
      description = "Generation limit per document; 0: per task (120 for the summary, 64 otherwise).")
  public int maxNewTokens;

  @Option(names = "--run-id", defaultValue = "eval", description = "run_id column value (default: ${DEFAULT-VALUE}).")
  public String runId;

  @Option(names = "--device", defaultValue = "auto", description = "auto, cpu or cuda (default: ${DEFAULT-VALUE}).")
  public String device;

  @Option(names = "--threads", defaultValue = "0", description = "CPU threads; 0 = all cores.")
  public int threads;

  @Option(names = "--prefill-chunk", defaultValue = "" + EngineSpec.DEFAULT_PREFILL_CHUNK,
      description = "Prefill chunk in tokens (default: ${DEFAULT-VALUE}; the GPU engine uses at least 4096). TSA "
      + "ignores it: its own chunk parameter (tsa:chunk, default 4096) fixes its selection scope on both backends. TokenSelect's prefill selects per sub-chunk "
      + "(tokenselect:chunk) and sees every cached token, whatever this is.")
  public int prefillChunk;

  @Option(names = "--no-fidelity", description = "Skip the fidelity measurement against dense attention (KL, top-1 "
      + "agreement, attention recall; docs/fidelity.md), which costs one dense run per document and one teacher-forced "
      + "run per document and policy.")
  public boolean noFidelity;

  @Option(names = "--recall-points", defaultValue = "-1", description = "Attention recall at this many prompt and as "
      + "many decode positions per document; -1 (default): 4 on the CPU, 0 on the GPU (which cannot measure it).")
  public int recallPoints;

  @Option(names = "--write-suite-only", description = "Write <output>/eval/suite.jsonl and stop (the suite is also job input).")
  public boolean writeSuiteOnly;

  /** The policies asked for, in order; "dense" when none. */
  public List<String> policyList() {
    List<String> out = new ArrayList<>(policy);
    if (policies != null && !policies.isBlank()) {
      switch (policies.trim()) {
        case "standard" -> out.addAll(STANDARD_POLICIES);
        case "ci" -> out.addAll(CI_POLICIES);
        default -> Arrays.stream(policies.split(";")).map(String::trim).filter(s -> !s.isEmpty()).forEach(out::add);
      }
    }
    if (out.isEmpty()) out.add("dense");
    return out;
  }

  public Path evalDir() {
    return output.resolve("eval");
  }
}
