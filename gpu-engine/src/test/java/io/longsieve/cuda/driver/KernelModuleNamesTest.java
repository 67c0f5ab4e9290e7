package io.longsieve.cuda.driver;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Runs without a GPU: {@link KernelModule} finds a kernel in the sm_90a module exactly when the kernel is
 * defined under src/main/cuda/hopper (that folder alone is compiled into the sm_90a cubin, by
 * build-fatbin.sh). A kernel the rule sends to the wrong module fails at run time with
 * CUDA_ERROR_NOT_FOUND, on a GPU only.
 */
class KernelModuleNamesTest {

  private static final Path CUDA = Path.of("src/main/cuda");
  private static final Pattern KERNEL = Pattern.compile("extern\\s+\"C\"\\s+__global__[^(]*?\\b(\\w+)\\s*\\(");

  @Test
  void theSm90aRuleTakesTheHopperKernelsAndNoOthers() throws IOException {
    List<String> hopper = kernels(CUDA.resolve("hopper"));
    List<String> others = new ArrayList<>();
    try (Stream<Path> dirs = Files.list(CUDA)) {
      for (Path d : dirs.filter(Files::isDirectory).filter(d -> !d.endsWith("hopper")).toList()) others.addAll(kernels(d));
    }
    assertTrue(hopper.contains("gemm_sm90") && hopper.contains("gemm_fp8_sm90") && hopper.contains("gemm_fp8_block_sm90"),
        "the source scan finds the Hopper GEMMs: " + hopper);
    assertTrue(others.size() > 50, "the source scan finds the other kernels: " + others.size());
    for (String k : hopper) assertTrue(KernelModule.isHopperKernel(k), k + " is in hopper/ but looked up in the fatbin");
    for (String k : others) assertFalse(KernelModule.isHopperKernel(k), k + " is outside hopper/ but looked up in the sm_90a cubin");
  }

  @Test
  void theScanReadsKernelNames() {
    Matcher m = KERNEL.matcher(withoutLaunchBounds("extern \"C\" __global__ void __launch_bounds__(GH_THREADS, 1)\n    gemm_fp8_sm90(const int* a)"));
    assertTrue(m.find());
    assertEquals("gemm_fp8_sm90", m.group(1));
  }

  private static String withoutLaunchBounds(String source) {
    return source.replaceAll("__launch_bounds__\\s*\\([^)]*\\)", "");
  }

  private static List<String> kernels(Path dir) throws IOException {
    List<String> names = new ArrayList<>();
    try (Stream<Path> files = Files.walk(dir)) {
      for (Path f : files.filter(p -> p.toString().endsWith(".cu") || p.toString().endsWith(".cuh")).toList()) {
        Matcher m = KERNEL.matcher(withoutLaunchBounds(Files.readString(f)));
        while (m.find()) names.add(m.group(1));
      }
    }
    return names;
  }
}
