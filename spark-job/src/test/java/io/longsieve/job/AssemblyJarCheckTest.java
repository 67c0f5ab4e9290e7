package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.jar.Attributes;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The assembly profile's check of the spark-submit jar (src/build/check-assembly-jar.sh, run after the
 * shade): it passes a jar that carries what a linux-x86_64 cluster needs and fails, naming the entry,
 * one with another platform's natives, JCuda's NVPTX compiler, unrelocated guava, a manifest that
 * does not say (or misstates) the CUDA build, or, where gcc is required (LONGSIEVE_REQUIRE_CC=1: CI and
 * the bundles), no C kernels for the CPU backend. The real jar is checked by every assembly build.
 */
class AssemblyJarCheckTest {

  static final Path SCRIPT = Path.of("src", "build", "check-assembly-jar.sh").toAbsolutePath();

  @TempDir
  Path dir;

  private static final List<String> GOOD = List.of("io/longsieve/job/JobCli.class",
      "io/longsieve/shaded/com/google/common/collect/ImmutableList.class", "lib/libJCudaDriver-12.6.0-linux-x86_64.so",
      "com/sun/jna/linux-x86-64/libjnidispatch.so", "native/lib/linux-x86_64/cpu/libtokenizers.so",
      "io/longsieve/cuda/longsieve.fatbin");

  private Path jar(String name, List<String> entries, String build, String driver) throws Exception {
    Manifest m = new Manifest();
    m.getMainAttributes().put(Attributes.Name.MANIFEST_VERSION, "1.0");
    if (build != null) m.getMainAttributes().putValue("LongSieve-CUDA-Build", build);
    if (driver != null) m.getMainAttributes().putValue("LongSieve-Min-Driver", driver);
    Path p = dir.resolve(name);
    try (OutputStream os = Files.newOutputStream(p); JarOutputStream j = new JarOutputStream(os, m)) {
      for (String e : entries) {
        j.putNextEntry(new JarEntry(e));
        j.write(1);
        j.closeEntry();
      }
    }
    return p;
  }

  private static List<String> with(String... extra) {
    List<String> l = new ArrayList<>(GOOD);
    l.addAll(List.of(extra));
    return l;
  }

  /** exit code and stderr of the check on {@code jar}, gcc not required (CI's LONGSIEVE_REQUIRE_CC=1 not passed on) */
  private static Object[] check(Path jar) throws Exception {
    return check(jar, false);
  }

  /** exit code and stderr of the check on {@code jar}, with LONGSIEVE_REQUIRE_CC=1 when requireCc */
  private static Object[] check(Path jar, boolean requireCc) throws Exception {
    ProcessBuilder b = new ProcessBuilder("bash", SCRIPT.toString(), jar.toString()).redirectOutput(ProcessBuilder.Redirect.DISCARD);
    b.environment().remove("LONGSIEVE_REQUIRE_CC");
    if (requireCc) b.environment().put("LONGSIEVE_REQUIRE_CC", "1");
    Process p = b.start();
    String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
    return new Object[] {p.waitFor(), err};
  }

  private void assertRefused(Path jar, String says) throws Exception {
    Object[] r = check(jar);
    assertEquals(1, r[0], (String) r[1]);
    assertTrue(((String) r[1]).contains(says), (String) r[1]);
  }

  @Test
  void aJarForLinuxX86WithItsCudaBuildPasses() throws Exception {
    Object[] r = check(jar("good.jar", GOOD, "CUDA 13.0", "R580"));
    assertEquals(0, r[0], (String) r[1]);
    assertTrue(((String) r[1]).contains("CUDA 13.0, min driver R580"), (String) r[1]);
    List<String> cpuOnly = new ArrayList<>(GOOD);
    cpuOnly.remove("io/longsieve/cuda/longsieve.fatbin");
    assertEquals(0, check(jar("cpu.jar", cpuOnly, "none", "none"))[0], "a build without nvcc says none");
  }

  @Test
  void otherPlatformsNativesTheNvptxCompilerAndGuavaAreRefused() throws Exception {
    assertRefused(jar("dll.jar", with("com/sun/jna/win32-x86/jnidispatch.dll"), "CUDA 13.0", "R580"),
        "native libraries for other platforms: com/sun/jna/win32-x86/jnidispatch.dll");
    assertRefused(jar("mac.jar", with("native/lib/osx-aarch64/cpu/libtokenizers.dylib"), "CUDA 13.0", "R580"),
        "osx-aarch64");
    assertRefused(jar("ptx.jar", with("lib/libJNvPTXCompiler-12.6.0-linux-x86_64.so"), "CUDA 13.0", "R580"),
        "CUDA compiler pieces: lib/libJNvPTXCompiler");
    assertRefused(jar("guava.jar", with("com/google/common/base/Preconditions.class"), "CUDA 13.0", "R580"),
        "unrelocated guava");
  }

  @Test
  void whereGccIsRequiredTheCpuKernelsMustBeIn() throws Exception {
    Path without = jar("no-c.jar", GOOD, "CUDA 13.0", "R580");
    Object[] r = check(without, true);
    assertEquals(1, r[0], (String) r[1]);
    assertTrue(((String) r[1]).contains("no C kernels for the CPU backend"), (String) r[1]);
    Path with = jar("c.jar", with("io/longsieve/cpu/native/linux-x86_64/liblongsieve_cpu.so"), "CUDA 13.0", "R580");
    assertEquals(0, check(with, true)[0], "a jar with the C kernels passes");
  }

  @Test
  void aManifestThatDoesNotStateTheCudaBuildTrulyIsRefused() throws Exception {
    assertRefused(jar("bare.jar", GOOD, null, null), "LongSieve-CUDA-Build is ''");
    assertRefused(jar("unresolved.jar", GOOD, "${longsieve.cuda.build}", "R580"), "LongSieve-CUDA-Build");
    assertRefused(jar("claims-none.jar", GOOD, "none", "none"), "carries a fatbin but its manifest says");
  }
}
