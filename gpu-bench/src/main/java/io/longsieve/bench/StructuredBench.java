package io.longsieve.bench;

import com.networknt.schema.InputFormat;
import com.networknt.schema.Schema;
import com.networknt.schema.SchemaRegistry;
import com.networknt.schema.SpecificationVersion;
import io.longsieve.bootstrap.Backends;
import io.longsieve.engine.Engine;
import io.longsieve.engine.FinishReason;
import io.longsieve.engine.GenerationRequest;
import io.longsieve.engine.GenerationResult;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.engine.spi.SamplingParams;
import io.longsieve.structured.JsonCursor;
import io.longsieve.structured.OutputSchema;
import io.longsieve.structured.StructuredOutput;
import io.longsieve.structured.TokenVocabulary;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * The cost of structured output on the CPU (docs/structured-output.md), printed as lines for
 * bench/RESULTS.md:
 * <ol>
 *   <li>compile: a schema's parse + compile time (median of 20) and its first mask (median of 5, a new
 *       cache each time), for a 50-property object, a nested schema and a pattern-heavy one; and the masks
 *       of one whole document walked token by token on a cold cache;</li>
 *   <li>decode: ms per token at batch 8 on the bundled model, 8 rows held to a schema whose document
 *       cannot close within the steps (so every row runs all of them) against the same 8 rows free
 *       (EOS ignored), the schema rows' mask cache warm (a first run fills it); medians of the repeats,
 *       alternated in one process;</li>
 *   <li>validity: N rows over four schemas sampled at temperature 1.0 on a tiny checkpoint, every
 *       finished output judged by the networknt validator.</li>
 * </ol>
 * Usage: {@code StructuredBench [bundled model] [tiny model] [repeats] [rows] [device]}; device "cpu" (the
 * default, 2 threads) or "cuda" (the decode and validity parts on the GPU: the masks applied where the logits
 * are, docs/structured-output.md).
 */
public final class StructuredBench {
  private StructuredBench() {}

  static final String FIFTY;
  static {
    StringBuilder s = new StringBuilder("{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"field_0\"],\"properties\":{");
    for (int i = 0; i < 50; i++) {
      s.append(i == 0 ? "" : ",").append("\"field_").append(i).append("\":").append(switch (i % 5) {
        case 0 -> "{\"type\":\"string\",\"maxLength\":40}";
        case 1 -> "{\"type\":\"integer\",\"minimum\":0,\"maximum\":100000}";
        case 2 -> "{\"enum\":[\"low\",\"medium\",\"high\"]}";
        case 3 -> "{\"type\":\"number\",\"minimum\":-1,\"maximum\":1}";
        default -> "{\"type\":[\"boolean\",\"null\"]}";
      });
    }
    FIFTY = s.append("}}").toString();
  }

  static final String NESTED = """
      {"$defs": {"score": {"type": "number", "minimum": 0, "exclusiveMaximum": 10}},
       "type": "object", "additionalProperties": false, "required": ["kind", "count", "items"],
       "properties": {
         "kind": {"enum": ["contract", "invoice", "letter"]},
         "count": {"type": "integer", "minimum": -3, "maximum": 2000},
         "items": {"type": "array", "minItems": 1, "maxItems": 3, "items": {
           "type": "object", "required": ["name"], "additionalProperties": false,
           "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 6},
                          "score": {"$ref": "#/$defs/score"}, "flag": {"type": ["boolean", "null"]}}}},
         "note": {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]}}}""";

  static final String PATTERNS = """
      {"type": "object", "required": ["id", "date", "email"], "properties": {
        "id": {"type": "string", "pattern": "^[A-Z]{3}-\\\\d{4,6}$"},
        "date": {"type": "string", "pattern": "^(19|20)\\\\d\\\\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\\\\d|3[01])$"},
        "email": {"type": "string", "pattern": "^[a-z0-9._]+@[a-z0-9]+\\\\.(com|org|net)$", "maxLength": 40}}}""";

  static final String SMALL = """
      {"type": "array", "maxItems": 5, "items": {"oneOf": [{"type": "integer", "minimum": 0, "maximum": 999},
        {"type": "string", "enum": ["none", "many"]}]}}""";

  /** Never closes within the decode steps: every row runs them all. */
  static final String LONG = "{\"type\":\"array\",\"minItems\":500,\"items\":{\"type\":\"string\",\"maxLength\":16}}";

  public static void main(String[] args) {
    Path bundled = Path.of(args.length > 0 ? args[0] : "models/longsieve-needle-7m");
    Path tiny = Path.of(args.length > 1 ? args[1] : "gpu-engine/src/test/resources/models/llama-gqa");
    int repeats = args.length > 2 ? Integer.parseInt(args[2]) : 5;
    int rows = args.length > 3 ? Integer.parseInt(args[3]) : 1000;
    String device = args.length > 4 ? args[4] : "cpu";
    compile(bundled);
    decode(bundled, repeats, 48, device);
    validity(tiny, rows, device);
  }

  static void compile(Path model) {
    try (LoadedModel m = LoadedModel.load(model)) {
      TokenVocabulary vocab = TokenVocabulary.load(model, m.config().vocabSize(), m.eosIds());
      for (String[] s : new String[][] {{"fifty-properties", FIFTY}, {"nested", NESTED}, {"patterns", PATTERNS}}) {
        double[] parse = new double[20], first = new double[5];
        for (int i = 0; i < 5; i++) OutputSchema.parse(s[1]); // warm the JIT
        for (int i = 0; i < parse.length; i++) {
          long t = System.nanoTime();
          OutputSchema.parse(s[1]);
          parse[i] = (System.nanoTime() - t) / 1e6;
        }
        OutputSchema schema = OutputSchema.parse(s[1]);
        for (int i = 0; i < first.length; i++) {
          StructuredOutput so = new StructuredOutput(vocab);
          long t = System.nanoTime();
          so.start(schema).allowed();
          first[i] = (System.nanoTime() - t) / 1e6;
        }
        System.out.printf(Locale.ROOT, "compile %-16s parse+compile %.2f ms (median of %d), first mask %.2f ms (median of %d), vocab %d%n",
            s[0], median(parse), parse.length, median(first), first.length, vocab.size());
      }
      // one document's masks on a cold cache: its own canonical tokens walked through a cursor
      String doc = "{\"kind\": \"invoice\", \"count\": 12, \"items\": [{\"name\": \"desk\", \"score\": 7.5, \"flag\": true}, "
          + "{\"name\": \"lamp\"}], \"note\": null}";
      int[] ids = m.tokenizer().encode(doc, false);
      StructuredOutput so = new StructuredOutput(vocab);
      JsonCursor c = so.start(OutputSchema.parse(NESTED));
      long t = System.nanoTime();
      c.allowed();
      for (int id : ids) {
        c.accept(id);
        if (!c.complete()) c.allowed();
      }
      double ms = (System.nanoTime() - t) / 1e6;
      var masks = so.masks(OutputSchema.parse(NESTED));
      System.out.printf(Locale.ROOT, "compile document-walk   %d tokens, %d masks computed cold in %.1f ms (%.2f ms per mask); complete %s%n",
          ids.length, masks.computed(), ms, masks.computeMs() / Math.max(1, masks.computed()), c.complete());
    }
  }

  static void decode(Path model, int repeats, int steps, String device) {
    try (Engine e = Backends.open(spec(model, device))) {
      System.out.printf(Locale.ROOT, "decode on %s (%s)%n", e.backend(), e.device());
      OutputSchema longSchema = OutputSchema.parse(LONG), nested = OutputSchema.parse(NESTED);
      List<GenerationRequest> constrained = new ArrayList<>(), free = new ArrayList<>(), real = new ArrayList<>();
      for (int i = 0; i < 8; i++) {
        GenerationRequest r = GenerationRequest.chat("d" + i, "List the items of note " + i + ".", steps)
            .withSampling(new SamplingParams(1.0, 1.0, i));
        constrained.add(r.withJsonSchema(longSchema));
        free.add(r.withMinNewTokens(steps));
        real.add(r.withMaxNewTokens(300).withJsonSchema(nested));
      }
      msPerToken(e.generate(constrained)); // fills the mask cache: the same seeds walk the same states again
      msPerToken(e.generate(real));
      double[] c = new double[repeats], f = new double[repeats], n = new double[repeats];
      List<GenerationResult> last = null;
      for (int i = 0; i < repeats; i++) {
        f[i] = msPerToken(e.generate(free));
        last = e.generate(constrained);
        c[i] = msPerToken(last);
        n[i] = msPerToken(e.generate(real));
      }
      System.out.printf(Locale.ROOT, "decode batch 8, %d steps: free %.3f ms/token, schema (warm) %.3f ms/token, overhead %+.1f%% "
          + "(medians of %d, alternated); nested schema, rows ending as their documents close: %.3f ms/token; runs f=%s c=%s%n",
          steps, median(f), median(c), 100 * (median(c) / median(f) - 1), repeats, median(n), Arrays.toString(round(f)),
          Arrays.toString(round(c)));
      extraWork(e, last, longSchema, median(f));
    }
  }

  /**
   * The work a schema adds to each token on the CPU, timed alone (robust on a loaded machine): the
   * constrained rows' tokens replayed through a warm cursor (mask look-up, advance, completion check)
   * plus the mask applied to a logits row, per token, against the free rows' decode ms/token.
   */
  static void extraWork(Engine e, List<GenerationResult> rows, OutputSchema schema, double freeMsPerToken) {
    int vocab = e.model().config().vocabSize();
    StructuredOutput so = new StructuredOutput(TokenVocabulary.load(e.model().dir(), vocab, e.model().eosIds()));
    float[] logits = new float[vocab];
    double[] perToken = new double[7];
    for (int rep = 0; rep < perToken.length + 2; rep++) { // the first two warm the cache and the JIT
      long t = System.nanoTime();
      int tokens = 0;
      for (GenerationResult r : rows) {
        JsonCursor cur = so.start(schema);
        for (int id : r.tokenIds()) {
          Arrays.fill(logits, 0.5f);
          io.longsieve.engine.spi.Sampler.mask(logits, vocab, cur.allowed());
          cur.accept(id);
          if (cur.complete()) break;
          tokens++;
        }
      }
      if (rep >= 2) perToken[rep - 2] = (System.nanoTime() - t) / 1e3 / tokens;
    }
    System.out.printf(Locale.ROOT, "decode extra work per token (warm cursor + mask on the logits): %.2f us (median of %d), "
        + "%.2f%% of the free rows' %.3f ms/token%n", median(perToken), perToken.length,
        100 * median(perToken) / 1e3 / freeMsPerToken, freeMsPerToken);
  }

  /** Mean over the rows of decode ms per generated token after the first. */
  static double msPerToken(List<GenerationResult> out) {
    double sum = 0;
    for (GenerationResult r : out) sum += r.stats().decodeMs() / Math.max(1, r.stats().outputTokens() - 1);
    return sum / out.size();
  }

  /** The engine both timed parts open: batch 8, and 2 threads on the CPU. */
  static EngineSpec spec(Path model, String device) {
    return EngineSpec.of(model).withDevice(device).withThreads(2).withMaxBatch(8);
  }

  static void validity(Path model, int rows, String device) {
    SchemaRegistry registry = SchemaRegistry.withDefaultDialect(SpecificationVersion.DRAFT_2020_12);
    String[] texts = {NESTED, PATTERNS, SMALL, FIFTY};
    Schema[] judges = new Schema[texts.length];
    OutputSchema[] schemas = new OutputSchema[texts.length];
    for (int i = 0; i < texts.length; i++) {
      judges[i] = registry.getSchema(texts[i], InputFormat.JSON);
      schemas[i] = OutputSchema.parse(texts[i]);
    }
    long t0 = System.nanoTime();
    int finished = 0, valid = 0, cut = 0, tokens = 0;
    List<String> invalid = new ArrayList<>();
    try (Engine e = Backends.open(spec(model, device))) {
      System.out.printf(Locale.ROOT, "validity on %s (%s)%n", e.backend(), e.device());
      for (int from = 0; from < rows; from += 40) {
        List<GenerationRequest> batch = new ArrayList<>();
        for (int i = from; i < Math.min(rows, from + 40); i++) {
          batch.add(GenerationRequest.chat("v" + i, "Record " + i + ":", 600).withJsonSchema(schemas[i % texts.length])
              .withSampling(new SamplingParams(1.0, 1.0, 5000 + i)));
        }
        List<GenerationResult> out = e.generate(batch);
        for (int k = 0; k < out.size(); k++) {
          GenerationResult r = out.get(k);
          tokens += r.tokenIds().length;
          if (r.finishReason() == FinishReason.LENGTH || r.finishReason() == FinishReason.CONTEXT_FULL) {
            cut++;
            continue;
          }
          finished++;
          boolean ok;
          try {
            ok = judges[(from + k) % texts.length].validate(r.text(), InputFormat.JSON).isEmpty();
          } catch (RuntimeException notJson) {
            ok = false;
          }
          if (ok) valid++;
          else if (invalid.size() < 5) invalid.add(r.text());
        }
      }
    }
    System.out.printf(Locale.ROOT, "validity %d rows over %d schemas at temperature 1.0 (%s): %d finished, %d valid (%.1f%%), "
        + "%d cut by max_new_tokens, %d tokens in %.1f s; invalid: %s%n", rows, texts.length, model.getFileName(), finished,
        valid, 100.0 * valid / Math.max(1, finished), cut, tokens, (System.nanoTime() - t0) / 1e9, invalid);
  }

  static double median(double[] v) {
    double[] s = v.clone();
    Arrays.sort(s);
    return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  }

  static double[] round(double[] v) {
    double[] r = new double[v.length];
    for (int i = 0; i < v.length; i++) r[i] = Math.round(v[i] * 1000) / 1000.0;
    return r;
  }
}
