package io.longsieve.cuda.kernels;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A kernel source's integer {@code #define}, for the host tests that keep a Java launch constant equal to the
 * kernel's (a mismatch compiles and launches, then computes garbage). Tests run from gpu-engine/, as under Maven.
 */
public final class KernelDefines {

  private KernelDefines() {}

  /** The value of {@code #define name N} in src/main/cuda/file (e.g. "select/ts_topk.cuh"); fails the test when there is none. */
  public static int of(String file, String name) throws IOException {
    String src = Files.readString(Path.of("src/main/cuda", file));
    Matcher m = Pattern.compile("#define " + name + " (\\d+)").matcher(src);
    assertTrue(m.find(), name + " in " + file);
    return Integer.parseInt(m.group(1));
  }
}
