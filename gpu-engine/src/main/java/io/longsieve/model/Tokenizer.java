package io.longsieve.model;

import ai.djl.huggingface.tokenizers.Encoding;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The checkpoint's {@code tokenizer.json}, run by the Hugging Face tokenizers library (through DJL,
 * natives bundled, offline), so ids equal what transformers produces. Thread-safe.
 */
public final class Tokenizer implements AutoCloseable {

  /** Texts at least this long are remembered (see {@link #encode}); short ones are cheap to redo. */
  static final int MEMO_MIN_CHARS = 4096;
  private static final int MEMO_ENTRIES = 8;

  private final HuggingFaceTokenizer withSpecial;
  private final HuggingFaceTokenizer plain;
  // (text, addSpecial) -> ids of the last few long texts, most recent last
  private final Map<Key, int[]> recent = new LinkedHashMap<>(16, 0.75f, true) {
    @Override
    protected boolean removeEldestEntry(Map.Entry<Key, int[]> eldest) {
      return size() > MEMO_ENTRIES;
    }
  };

  private record Key(String text, boolean addSpecial) {}

  private Tokenizer(HuggingFaceTokenizer withSpecial, HuggingFaceTokenizer plain) {
    this.withSpecial = withSpecial;
    this.plain = plain;
  }

  static {
    // On a host with a CUDA GPU, DJL looks for a CUDA build of its tokenizers library and tries to
    // download one (verified on an H200 host); the CPU build bundled in the jar is the one we want.
    if (System.getenv("RUST_FLAVOR") == null && System.getProperty("RUST_FLAVOR") == null) {
      System.setProperty("RUST_FLAVOR", "cpu");
    }
  }

  public static Tokenizer load(Path modelDir) {
    Path file = modelDir.resolve("tokenizer.json");
    if (!Files.isRegularFile(file)) throw new CheckpointException(file + ": missing (no tokenizer.json in the model folder)");
    try {
      return new Tokenizer(open(file, true), open(file, false));
    } catch (IOException | RuntimeException e) {
      throw new CheckpointException(file + ": cannot be loaded by the tokenizers library: " + e.getMessage(), e);
    }
  }

  private static HuggingFaceTokenizer open(Path file, boolean addSpecial) throws IOException {
    return HuggingFaceTokenizer.newInstance(file, Map.of(
        "addSpecialTokens", Boolean.toString(addSpecial),
        "truncation", "false",
        "padding", "false",
        "modelMaxLength", Integer.toString(Integer.MAX_VALUE - 1)));
  }

  /**
   * Token ids of {@code text}. With {@code addSpecial} the tokenizer's post-processor adds its own
   * tokens (usually BOS), as {@code tokenizer(text)} does in transformers; a chat-templated prompt
   * already holds them and is encoded without.
   *
   * <p>The last few long texts are remembered: the Spark job's --truncate counts the cut prompt and
   * then prepares it (a request that keeps its ids, Engine.prepare), and a 128K-token document
   * should be tokenized once. Each call returns its own array.
   */
  public int[] encode(String text, boolean addSpecial) {
    if (text.length() < MEMO_MIN_CHARS) return run(text, addSpecial);
    Key key = new Key(text, addSpecial);
    int[] ids;
    synchronized (recent) {
      ids = recent.get(key);
    }
    if (ids == null) {
      ids = run(text, addSpecial);
      synchronized (recent) {
        recent.put(key, ids);
      }
    }
    return ids.clone();
  }

  private int[] run(String text, boolean addSpecial) {
    Encoding enc = (addSpecial ? withSpecial : plain).encode(text);
    long[] ids = enc.getIds();
    int[] out = new int[ids.length];
    for (int i = 0; i < ids.length; i++) out[i] = (int) ids[i];
    return out;
  }

  /** Text of the ids; special tokens are dropped when {@code skipSpecial}. */
  public String decode(int[] ids, int from, int to, boolean skipSpecial) {
    long[] l = new long[to - from];
    for (int i = from; i < to; i++) l[i - from] = ids[i];
    return plain.decode(l, skipSpecial);
  }

  public String decode(int[] ids, boolean skipSpecial) {
    return decode(ids, 0, ids.length, skipSpecial);
  }

  @Override
  public void close() {
    withSpecial.close();
    plain.close();
  }
}
