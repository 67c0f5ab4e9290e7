package io.longsieve.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A machine without nvcc: the kernel step of the build (build-fatbin.sh, which Maven runs in
 * generate-resources) is skipped with one warning and leaves no kernels, and the CUDA backend then
 * says the build has none. CI sets LONGSIEVE_REQUIRE_NVCC=1 so that its build fails instead. The
 * scripts run with a PATH of a few tools and no CUDA_HOME, so no nvcc is found even on a machine that
 * has one; nothing is compiled, so this takes well under a second.
 */
class NoNvccBuildTest {

  private static final Path ENGINE_SCRIPT = Path.of("src/main/cuda/build-fatbin.sh").toAbsolutePath();
  private static final Path BENCH_SCRIPT = Path.of("../gpu-bench/src/main/cuda/build-bench-fatbin.sh").toAbsolutePath();

  @TempDir
  Path dir;

  record Result(int exit, String stderr) {}

  /** Runs SCRIPT OUT_DIR with a PATH that holds only the tools the scripts use besides nvcc. */
  private Result run(Path script, Path outDir, Map<String, String> extraEnv) throws Exception {
    Path bin = Files.createDirectories(dir.resolve("bin"));
    for (String tool : List.of("dirname", "mkdir", "cmp", "rm", "mv", "sed", "cat", "find")) {
      Path real = List.of(Path.of("/usr/bin", tool), Path.of("/bin", tool)).stream().filter(Files::isExecutable)
          .findFirst().orElseThrow(() -> new IllegalStateException("no " + tool + " in /usr/bin or /bin"));
      // a wrapper, not a link: JUnit warns about every link out of a temp folder it deletes
      Path wrapper = Files.writeString(bin.resolve(tool), "#!/bin/sh\nexec " + real + " \"$@\"\n");
      wrapper.toFile().setExecutable(true);
    }
    Path bash = List.of(Path.of("/usr/bin/bash"), Path.of("/bin/bash")).stream().filter(Files::isExecutable)
        .findFirst().orElseThrow();
    ProcessBuilder pb = new ProcessBuilder(bash.toString(), script.toString(), outDir.toString());
    pb.environment().clear();
    pb.environment().put("PATH", bin.toString());
    pb.environment().put("CUDA_HOME", dir.resolve("no-cuda").toString());
    pb.environment().putAll(extraEnv);
    pb.redirectOutput(ProcessBuilder.Redirect.DISCARD);
    Process p = pb.start();
    String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
    return new Result(p.waitFor(), err);
  }

  @Test
  void withoutNvccTheKernelStepIsSkippedWithOneWarningAndNoKernels() throws Exception {
    Path out = Files.createDirectories(dir.resolve("classes/io/longsieve/cuda"));
    // a fatbin left by an earlier build with nvcc must not survive into a jar that says "none"
    Files.writeString(out.resolve("longsieve.fatbin"), "stale");
    Files.writeString(out.resolve("longsieve_sm90a.cubin"), "stale");

    Result r = run(ENGINE_SCRIPT, out, Map.of());

    assertEquals(0, r.exit(), r.stderr());
    assertEquals(1, r.stderr().strip().lines().count(), "one line: " + r.stderr());
    assertTrue(r.stderr().startsWith("WARNING: nvcc not found: building without the CUDA kernels"), r.stderr());
    assertFalse(Files.exists(out.resolve("longsieve.fatbin")));
    assertFalse(Files.exists(out.resolve("longsieve_sm90a.cubin")));
    assertEquals("cuda.build=none\ncuda.min_driver=none\n", read(out.resolve("cuda-build.properties")));
  }

  @Test
  void theBenchKernelsAreSkippedQuietlyBesideTheEnginesWarning() throws Exception {
    Path out = dir.resolve("bench-classes");
    Result r = run(BENCH_SCRIPT, out, Map.of());
    assertEquals(0, r.exit(), r.stderr());
    assertEquals("", r.stderr());
    assertFalse(Files.exists(out.resolve("longsieve_bench.fatbin")));
  }

  @Test
  void ciRequiresNvccAndFailsTheBuildWithoutIt() throws Exception {
    Result r = run(ENGINE_SCRIPT, dir.resolve("ci-classes"), Map.of("LONGSIEVE_REQUIRE_NVCC", "1"));
    assertEquals(2, r.exit(), r.stderr());
    assertTrue(r.stderr().startsWith("ERROR: nvcc not found and LONGSIEVE_REQUIRE_NVCC=1"), r.stderr());
  }

  @Test
  void aBuildWithoutKernelsIsReportedBeforeTheDriverIsLookedFor() {
    // on a GPU host too: the driver would find the device, then fail to find the fatbin resource
    String why = CudaAvailability.probe(false);
    assertEquals(CudaAvailability.NO_KERNELS, why);
    assertTrue(why.startsWith("this build has no CUDA kernels"), why);
    assertFalse(why.contains("\n"));
  }

  private static String read(Path p) throws IOException {
    return Files.readString(p, StandardCharsets.UTF_8);
  }
}
