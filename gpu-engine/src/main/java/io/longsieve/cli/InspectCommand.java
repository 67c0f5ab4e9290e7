package io.longsieve.cli;

import io.longsieve.cuda.GpuVerifiedFamilies;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.model.Checkpoint;
import io.longsieve.model.CheckpointException;
import io.longsieve.model.LayerKind;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import io.longsieve.model.TensorPlan;
import io.longsieve.policy.KvFootprint;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code longsieve inspect --model DIR}: what the engine reads from a checkpoint folder and whether
 * it fits a GPU, before any run: architecture, parameters, dtype, context length and RoPE as the
 * engine reads them, weight bytes (from the safetensors headers), KV bytes per token dense and under
 * each KV policy, the longest document and the number of N-token documents that fit in the given
 * memory, the chat template's roles, and whether every tensor the engine loads is there. A folder
 * the engine cannot run is refused in one line (exit 2), as {@code run} refuses it before Spark
 * starts (spark-job ModelCheck: the same LoadedModel, Checkpoint and TensorPlan checks).
 * Reads headers only, no weights (a 16 GB checkpoint: 1.9 s of CPU on the 2-core dev VM).
 */
@Command(name = "inspect", mixinStandardHelpOptions = true,
    description = "What the engine reads from a checkpoint and whether it fits a GPU (no weights read, no GPU needed).")
public final class InspectCommand implements Callable<Integer> {

  @Spec
  CommandSpec spec;

  @Option(names = "--model", required = true, description = "Hugging Face checkpoint folder.")
  Path model;

  @Option(names = "--gpu-memory", defaultValue = "141GB",
      description = "GPU memory free when the engine opens: 141GB (1000s), 80GiB (1024s), or bytes (default: ${DEFAULT-VALUE}, an H200).")
  String gpuMemory;

  @Option(names = "--memory-fraction", defaultValue = "0.9",
      description = "Share of it the engine takes, as the job's gpuMemoryFraction (default: ${DEFAULT-VALUE}).")
  double memoryFraction;

  @Option(names = "--max-tokens", defaultValue = "131072",
      description = "Tokens (prompt + output) of each document in the count of documents that fit at once (default: ${DEFAULT-VALUE}).")
  int maxTokens;

  @Option(names = "--prefill-chunk", defaultValue = "" + EngineSpec.DEFAULT_PREFILL_CHUNK,
      description = "Prefill chunk, as the job's prefillChunk; the GPU runs at least 4096 (default: ${DEFAULT-VALUE}).")
  int prefillChunk;

  @Override
  public Integer call() {
    long memory = parseBytes(gpuMemory);
    if (!(memoryFraction > 0 && memoryFraction <= 1)) throw new IllegalArgumentException("--memory-fraction must be in (0, 1]");
    if (maxTokens < 1) throw new IllegalArgumentException("--max-tokens must be at least 1");
    Inspection in;
    List<String> roles;
    try (LoadedModel m = LoadedModel.load(model); Checkpoint ck = Checkpoint.open(model)) {
      ModelConfig c = m.config();
      String arch = new com.fasterxml.jackson.databind.ObjectMapper().readTree(model.resolve("config.json").toFile())
          .path("architectures").path(0).asText("");
      in = Inspection.of(c, arch, ck.tensors(), TensorPlan.problems(ck, c));
      roles = m.chatTemplate().hasTemplate() ? m.chatTemplate().roles() : null;
    } catch (CheckpointException | java.io.IOException e) {
      throw new IllegalArgumentException("model " + model + ": " + e.getMessage(), e);
    }
    PrintWriter out = spec.commandLine().getOut();
    for (String line : report(in, roles, memory, memoryFraction, prefillChunk, maxTokens)) out.println(line);
    out.flush();
    if (!in.problems().isEmpty()) {
      throw new IllegalArgumentException("model " + model + " cannot run: tensors " + in.problemSummary());
    }
    return 0;
  }

  /** The report's lines (tests read them). */
  static List<String> report(Inspection in, List<String> roles, long memory, double fraction, int chunk, int docTokens) {
    ModelConfig c = in.config();
    List<String> o = new ArrayList<>();
    o.add(String.format(Locale.ROOT, "architecture  %s (model_type %s)", in.architecture().isEmpty() ? "-" : in.architecture(),
        c.modelType()));
    o.add(String.format(Locale.ROOT, "parameters    %s (%d layers, hidden %d, %d heads / %d KV heads of %d, MLP %d, vocab %d%s)",
        count(in.parameters()), c.numLayers(), c.hiddenSize(), c.numHeads(), c.numKvHeads(), c.headDim(),
        c.intermediateSize(), c.vocabSize(), c.tieWordEmbeddings() ? ", tied embeddings" : ""));
    o.add("dtype         " + in.dtypes().entrySet().stream().map(e -> e.getKey() + " " + e.getValue())
        .reduce((a, b) -> a + ", " + b).orElse("-") + " tensors");
    o.add(String.format(Locale.ROOT, "context       %d tokens (max_position_embeddings %d)", c.contextLength(), c.maxPositions()));
    for (Map.Entry<LayerKind, Integer> k : in.layerKinds().entrySet()) {
      LayerKind kind = k.getKey();
      Rope r = Rope.forLayer(c, c.layerKinds().indexOf(kind));
      o.add(String.format(Locale.ROOT, "layers        %d %s, RoPE base %s, scaling %s%s", k.getValue(),
          kind.sliding() ? "with a sliding window of " + kind.window() : "with full attention", num(kind.ropeTheta()),
          kind.ropeScaling().describe(), r.rotaryDim() < c.headDim() ? ", rotating " + r.rotaryDim() + " of " + c.headDim() : ""));
    }
    List<String> traits = new ArrayList<>();
    if (c.traits().qkNorm()) traits.add("q/k norm");
    if (c.traits().fusedProjections()) traits.add("fused qkv_proj and gate_up_proj");
    if (c.traits().sandwichNorms()) traits.add("norms after attention and MLP");
    if (c.traits().geglu()) traits.add("GeGLU-tanh");
    if (c.traits().embedScale() != 1) traits.add("embeddings × " + num(c.traits().embedScale()));
    if (Math.abs(c.traits().queryScale() * Math.sqrt(c.headDim()) - 1) > 1e-9) traits.add("query scale " + num(c.traits().queryScale()));
    if (c.traits().finalLogitSoftcap() > 0) traits.add("logit soft-cap " + num(c.traits().finalLogitSoftcap()));
    if (c.attentionBias()) traits.add("q/k/v bias");
    o.add("family        " + (traits.isEmpty() ? "Llama's decoder" : String.join(", ", traits)));
    o.add(String.format(Locale.ROOT, "weights       %s stored, %s on the GPU (matrices bf16 or narrower, norms f32)",
        bytes(in.storedBytes()), bytes(in.deviceWeightBytes())));
    o.add(in.problems().isEmpty() ? "tensors       all " + TensorPlan.of(c).stream().filter(t -> !t.optional()).count()
        + " the engine loads are present, in the shapes config.json implies"
        : "tensors       " + in.problems().size() + " the engine loads are not as it needs them: " + String.join("; ",
        in.problems().subList(0, Math.min(5, in.problems().size()))) + (in.problems().size() > 5 ? "; ..." : ""));
    o.add("chat roles    " + (roles == null ? "no chat template (plain System/User/Assistant layout)" : String.join(", ", roles)));
    o.add(String.format(Locale.ROOT, "KV per token  %s on the GPU (keys before and after RoPE, values; bf16), K+V alone %s%s",
        bytes(in.kvSlotBytes()), bytes(KvFootprint.keyValueBytes(c)),
        c.slidingLayers() > 0 ? "; sliding-window layers keep every token (the window masks)" : ""));
    o.add(String.format(Locale.ROOT, "KV policies   after compressing a %d-token prompt, default parameters:", docTokens));
    for (Inspection.KvLine l : in.kvLines(docTokens)) {
      o.add(String.format(Locale.ROOT, "  %-10s keeps %d of %d slots per compressed layer: %s in use (%s/token); holds %s%s",
          l.term().name(), l.keptSlots(), docTokens, bytes(l.bytesInUse()), bytes(l.bytesInUse() / docTokens),
          bytes(l.heldBytes()), l.onGpu() ? "" : " (CPU only)"));
    }
    Inspection.Fit f = in.fit(memory, fraction, chunk, docTokens);
    o.add(String.format(Locale.ROOT, "GPU           %s × %s = %s: weights %s, activations %s, KV %s", bytes(memory), num(fraction),
        bytes(f.budget()), bytes(f.weights()), bytes(f.activations()), bytes(f.kvRoom())));
    o.add(String.format(Locale.ROOT, "  longest document  %d tokens%s", f.longestTokens(),
        f.longestTokens() > c.contextLength() ? " of memory; the model's context stops at " + c.contextLength() : ""));
    o.add(String.format(Locale.ROOT, "  %d-token documents at once: %s (a sequence holds its pages from open to end, so a "
        + "KV policy changes what attention reads, not what fits)", docTokens,
        f.concurrent().entrySet().stream().map(e -> e.getKey() + " " + e.getValue()).reduce((a, b) -> a + ", " + b).orElse("-")));
    String unverified = GpuVerifiedFamilies.unverifiedReason(c);
    o.add("device auto   " + (unverified == null ? "cuda where a GPU is usable" : "cpu: " + unverified));
    return o;
  }

  private static final Pattern SIZE = Pattern.compile("(\\d+(?:\\.\\d+)?)\\s*([kmgt]i?b?|b)?", Pattern.CASE_INSENSITIVE);

  /** "141GB" (powers of 1000), "80GiB" (powers of 1024), "8e9" is refused: digits and a unit, or bytes. */
  static long parseBytes(String text) {
    Matcher m = SIZE.matcher(text.trim());
    if (!m.matches()) throw new IllegalArgumentException("--gpu-memory '" + text + "' is not a size like 141GB, 80GiB or 1000000000");
    double v = Double.parseDouble(m.group(1));
    String unit = m.group(2) == null ? "b" : m.group(2).toLowerCase(Locale.ROOT);
    int power = "bkmgt".indexOf(unit.charAt(0));
    double base = unit.contains("i") ? 1024 : 1000;
    return (long) (v * Math.pow(base, power));
  }

  private static String bytes(long b) {
    if (b >= 1_000_000_000L) return String.format(Locale.ROOT, "%.2f GB", b / 1e9);
    if (b >= 1_000_000L) return String.format(Locale.ROOT, "%.2f MB", b / 1e6);
    if (b >= 10_000L) return String.format(Locale.ROOT, "%.1f KB", b / 1e3);
    return b + " B";
  }

  private static String count(long n) {
    return n >= 1_000_000_000L ? String.format(Locale.ROOT, "%.2f B", n / 1e9)
        : n >= 1_000_000L ? String.format(Locale.ROOT, "%.2f M", n / 1e6) : Long.toString(n);
  }

  private static String num(double v) {
    if (v == Math.rint(v) && Math.abs(v) < 1e12) return Long.toString((long) v);
    return new java.math.BigDecimal(v).round(new java.math.MathContext(4)).stripTrailingZeros().toPlainString();
  }
}
