package io.longsieve.structured;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.longsieve.engine.spi.LoadedModel;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Set;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Token bytes read from tokenizer.json against the tokenizers library's own decoding of each id (DJL):
 * wherever a token's bytes are whole UTF-8, they are the text the library decodes; special tokens have none.
 */
class TokenVocabularyTest {

  @ParameterizedTest
  @ValueSource(strings = {"../models/longsieve-needle-7m", "src/test/resources/models/llama-gqa"})
  void byteLevelTokensAreWhatTheTokenizerDecodes(String dir) {
    try (LoadedModel m = LoadedModel.load(Path.of(dir))) {
      TokenVocabulary v = TokenVocabulary.load(m.dir(), m.config().vocabSize(), m.eosIds());
      int whole = 0;
      for (int id = 0; id < v.size(); id++) {
        byte[] b = v.bytes(id);
        String lib = m.tokenizer().decode(new int[] {id}, false);
        if (b == null) {
          assertTrue(m.eosIds().contains(id) || !lib.isEmpty() && lib.startsWith("<") || lib.isEmpty(), id + ": " + lib);
          continue;
        }
        String ours;
        try {
          ours = StandardCharsets.UTF_8.newDecoder().decode(ByteBuffer.wrap(b)).toString();
        } catch (CharacterCodingException partial) {
          continue; // a byte-level token that ends inside a character: the library shows U+FFFD there
        }
        assertEquals(lib, ours, "token " + id);
        whole++;
      }
      assertTrue(whole > v.size() / 2, "tokens compared: " + whole);
    }
  }

  @org.junit.jupiter.api.Test
  void sentencePieceTokensReplaceTheMetaSpaceAndFallBackToBytes() throws Exception {
    String json = """
        {"model": {"type": "BPE", "byte_fallback": true,
                   "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "\\u2581{": 4, "\\"": 5, "é": 6, "<0xC3>": 7}},
         "added_tokens": [{"id": 1, "content": "<s>", "special": true}, {"id": 2, "content": "</s>", "special": true}],
         "decoder": {"type": "Sequence", "decoders": [
           {"type": "Replace", "pattern": {"String": "\\u2581"}, "content": " "},
           {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}}""";
    TokenVocabulary v = TokenVocabulary.of(new ObjectMapper().readTree(json), 10, Set.of(2));
    assertArrayEquals(new byte[] {'\n'}, v.bytes(3));
    assertArrayEquals(" {".getBytes(StandardCharsets.UTF_8), v.bytes(4));
    assertArrayEquals("é".getBytes(StandardCharsets.UTF_8), v.bytes(6));
    assertArrayEquals(new byte[] {(byte) 0xc3}, v.bytes(7));
    assertNull(v.bytes(1));
    assertNull(v.bytes(2));
    assertNull(v.bytes(9)); // past the tokenizer's vocabulary: padding
  }

  @org.junit.jupiter.api.Test
  void anotherDecoderIsRefused() throws Exception {
    String json = "{\"model\": {\"vocab\": {\"a\": 0}}, \"decoder\": {\"type\": \"WordPiece\"}}";
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> TokenVocabulary.of(new ObjectMapper().readTree(json), 1, Set.of()));
    assertTrue(e.getMessage().contains("WordPiece"), e.getMessage());
  }
}
