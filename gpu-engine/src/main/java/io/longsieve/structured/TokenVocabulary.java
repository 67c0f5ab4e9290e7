package io.longsieve.structured;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.Set;

/**
 * Every token id's bytes as the tokenizer's decoder writes them, read from {@code tokenizer.json}
 * (the tokenizers library, through DJL, decodes whole sequences to text and cannot give the raw bytes
 * of a token that ends inside a UTF-8 character, which byte-level BPE tokens do). Two decoders are
 * understood: ByteLevel (GPT-2, Llama 3, Qwen: each character of a token stands for one byte) and the
 * SentencePiece style (Metaspace, or Replace "▁" with " " plus ByteFallback {@code <0xAB>} tokens:
 * Llama 2, Mistral). Special added tokens (chat markers, BOS, EOS) have no bytes: structured output
 * never writes them; the end-of-sequence ids are allowed by the mask engine itself, when the document
 * is complete.
 *
 * <p>Also keeps the ids sorted by their bytes with each one's common prefix with the previous, so the
 * mask engine walks the vocabulary as a trie ({@link TokenMasks}).
 */
public final class TokenVocabulary {

  private static final ObjectMapper JSON = new ObjectMapper();

  private final int size;          // the model's vocabulary (logits per step), >= the tokenizer's
  private final byte[][] bytes;    // (size) null: never written (special, unknown or padding ids)
  private final int[] sorted;      // ids with bytes, by their bytes
  private final int[] lcp;         // (sorted) common prefix with the previous id in sorted
  private final Set<Integer> eos;

  TokenVocabulary(byte[][] bytes, Set<Integer> eos) {
    this.size = bytes.length;
    this.bytes = bytes;
    this.eos = Set.copyOf(eos);
    Integer[] ids = new Integer[size];
    int n = 0;
    for (int i = 0; i < size; i++) if (bytes[i] != null && bytes[i].length > 0) ids[n++] = i;
    Integer[] have = Arrays.copyOf(ids, n);
    Arrays.sort(have, Comparator.comparing((Integer i) -> bytes[i], Arrays::compareUnsigned));
    sorted = new int[n];
    lcp = new int[n];
    for (int i = 0; i < n; i++) {
      sorted[i] = have[i];
      lcp[i] = i == 0 ? 0 : commonPrefix(bytes[have[i - 1]], bytes[have[i]]);
    }
  }

  /**
   * The vocabulary of the checkpoint folder's tokenizer.json, sized to the model's {@code vocabSize}
   * logits (ids past the tokenizer's are padding and never allowed).
   *
   * @throws SchemaException (keyword null) when the tokenizer's decoder is not one of the two understood
   */
  public static TokenVocabulary load(Path modelDir, int vocabSize, Set<Integer> eosIds) {
    Path file = modelDir.resolve("tokenizer.json");
    JsonNode root;
    try {
      root = JSON.readTree(file.toFile());
    } catch (IOException e) {
      throw new IllegalArgumentException(file + ": cannot be read for structured output: " + e.getMessage(), e);
    }
    return of(root, vocabSize, eosIds);
  }

  static TokenVocabulary of(JsonNode root, int vocabSize, Set<Integer> eosIds) {
    Decoder decoder = decoder(root.path("decoder"));
    byte[][] bytes = new byte[vocabSize][];
    JsonNode model = root.path("model");
    JsonNode vocab = model.path("vocab");
    if (vocab.isObject()) { // BPE, WordLevel: token -> id
      for (Iterator<Map.Entry<String, JsonNode>> it = vocab.fields(); it.hasNext(); ) {
        Map.Entry<String, JsonNode> e = it.next();
        int id = e.getValue().asInt(-1);
        if (id >= 0 && id < vocabSize) bytes[id] = decoder.bytes(e.getKey());
      }
    } else if (vocab.isArray()) { // Unigram: [piece, score] by id
      for (int id = 0; id < vocab.size() && id < vocabSize; id++) bytes[id] = decoder.bytes(vocab.get(id).path(0).asText());
    } else {
      throw new IllegalArgumentException("tokenizer.json has no model.vocab; structured output cannot read its tokens");
    }
    for (JsonNode t : root.path("added_tokens")) {
      int id = t.path("id").asInt(-1);
      if (id < 0 || id >= vocabSize) continue;
      // a special token (BOS, EOS, chat markers) is never part of the JSON text; other added tokens are their content
      bytes[id] = t.path("special").asBoolean(false) ? null : t.path("content").asText().getBytes(StandardCharsets.UTF_8);
    }
    for (int id : eosIds) if (id >= 0 && id < vocabSize) bytes[id] = null;
    return new TokenVocabulary(bytes, eosIds);
  }

  /** Logits per step (the model's vocabulary size). */
  public int size() {
    return size;
  }

  /** The bytes token {@code id} writes, or null for one structured output never writes. */
  byte[] bytes(int id) {
    return id >= 0 && id < size ? bytes[id] : null;
  }

  boolean isEos(int id) {
    return eos.contains(id);
  }

  Set<Integer> eos() {
    return eos;
  }

  int[] sorted() {
    return sorted;
  }

  int[] lcp() {
    return lcp;
  }

  private static int commonPrefix(byte[] a, byte[] b) {
    int n = Math.min(a.length, b.length), i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
  }

  /** Token text to the bytes the decoder writes for it; null: a token that writes nothing we can know. */
  private interface Decoder {
    byte[] bytes(String token);
  }

  private static Decoder decoder(JsonNode d) {
    String type = d.path("type").asText("");
    if (type.equals("ByteLevel")) return ByteLevel::bytes;
    if (type.equals("Metaspace")) return TokenVocabulary::sentencePiece;
    if (type.equals("Sequence")) {
      boolean replace = false, fallback = false;
      for (JsonNode step : d.path("decoders")) {
        String t = step.path("type").asText("");
        if (t.equals("ByteLevel")) return ByteLevel::bytes;
        if (t.equals("Metaspace")) replace = true;
        if (t.equals("Replace") && step.path("pattern").path("String").asText("").equals("\u2581")) replace = true;
        if (t.equals("ByteFallback")) fallback = true;
      }
      if (replace || fallback) return TokenVocabulary::sentencePiece;
    }
    throw new IllegalArgumentException("structured output reads byte-level (ByteLevel) and SentencePiece (Metaspace, "
        + "Replace + ByteFallback) tokenizers; this tokenizer.json's decoder is '" + (type.isEmpty() ? "none" : type) + "'");
  }

  /** SentencePiece pieces: "▁" is a space, "<0xAB>" the byte 0xAB, anything else its UTF-8. */
  private static byte[] sentencePiece(String piece) {
    if (piece.length() == 6 && piece.startsWith("<0x") && piece.endsWith(">")) {
      try {
        return new byte[] {(byte) Integer.parseInt(piece.substring(3, 5), 16)};
      } catch (NumberFormatException e) {
        // an ordinary piece that looks like one
      }
    }
    return piece.replace('\u2581', ' ').getBytes(StandardCharsets.UTF_8);
  }

  /** GPT-2's byte-to-character table, inverted: the ByteLevel decoder's mapping. */
  static final class ByteLevel {
    private static final Map<Character, Byte> CHAR_TO_BYTE = new HashMap<>();

    static {
      int n = 0;
      for (int b = 0; b < 256; b++) {
        boolean printable = b >= '!' && b <= '~' || b >= 0xa1 && b <= 0xac || b >= 0xae && b <= 0xff;
        char c = printable ? (char) b : (char) (256 + n++);
        CHAR_TO_BYTE.put(c, (byte) b);
      }
    }

    static byte[] bytes(String token) {
      byte[] out = new byte[token.length()];
      for (int i = 0; i < token.length(); i++) {
        Byte b = CHAR_TO_BYTE.get(token.charAt(i));
        if (b == null) return null;
        out[i] = b;
      }
      return out;
    }

    /** The token text for bytes (tests build vocabularies with it). */
    static String text(byte[] bytes) {
      StringBuilder sb = new StringBuilder();
      for (byte x : bytes) {
        for (Map.Entry<Character, Byte> e : CHAR_TO_BYTE.entrySet()) {
          if (e.getValue() == x) {
            sb.append(e.getKey());
            break;
          }
        }
      }
      return sb.toString();
    }
  }
}
