package io.longsieve.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The host writes each sequence's DecodeRow byte by byte (DecodeStep); the kernels read it as the C
 * struct of common/decode_row.cuh. A field added, moved or resized on one side only compiles and
 * runs, then reads the wrong cache: this test lays the struct out as the compiler does (natural
 * alignment, pointers and long long 8 bytes, int 4) and holds DecodeStep's offsets to it.
 */
class DecodeStepLayoutTest {

  @Test
  void hostOffsetsMatchTheKernelStruct() throws IOException {
    String src = Files.readString(Path.of("src/main/cuda/common/decode_row.cuh"));
    String body = src.substring(src.indexOf("struct DecodeRow {"), src.indexOf("};"));
    Map<String, Integer> offsets = new LinkedHashMap<>();
    Matcher m = Pattern.compile("^\\s*(const int\\*|bf16\\*|long long|int) (\\w+(?:, \\w+)*);", Pattern.MULTILINE)
        .matcher(body);
    int at = 0;
    while (m.find()) {
      int size = m.group(1).equals("int") ? 4 : 8;
      for (String name : m.group(2).split(", ")) {
        at = (at + size - 1) / size * size;
        offsets.put(name, at);
        at += size;
      }
    }
    int size = (at + 7) / 8 * 8;  // the struct aligns to its widest member
    assertEquals(Map.of("pageTable", DecodeStep.PAGE_TABLE, "kPre", DecodeStep.K_PRE, "kRope", DecodeStep.K_ROPE,
        "v", DecodeStep.V, "layerElems", DecodeStep.LAYER_ELEMS, "slot", DecodeStep.SLOT, "pos", DecodeStep.POS,
        "chunk", DecodeStep.CHUNK, "pad", DecodeStep.CHUNK + 4), offsets);
    assertEquals(DecodeStep.ROW_BYTES, size);
  }
}
