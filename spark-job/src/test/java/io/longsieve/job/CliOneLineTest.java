package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.longsieve.cuda.CudaAvailability;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every subcommand refuses in one line with exit 2 what a user can fix, before Spark starts: argument
 * errors (pointing at --help), a bad checkpoint, a missing file, a device the machine cannot use.
 */
class CliOneLineTest {

  @TempDir
  Path dir;

  private static void assertOneLine(JobTestSupport.Cli r, String start, String... contains) {
    assertEquals(2, r.code(), r.err());
    String err = r.err().strip();
    assertEquals(1, err.lines().count(), "one line: " + err);
    assertTrue(err.startsWith(start), err);
    for (String c : contains) assertTrue(err.contains(c), c + " in: " + err);
    assertTrue(r.out().isEmpty(), "no usage page: " + r.out());
  }

  @Test
  void argumentErrorsAreOneLinePointingAtHelp() {
    assertOneLine(JobTestSupport.cli("run", "--input", "a.jsonl", "--input", "b.jsonl", "--output", "o"),
        "longsieve run: option '--input' ", "(see 'longsieve run --help')");
    assertOneLine(JobTestSupport.cli("run", "--max-new-tokens", "abc"), "longsieve run: Invalid value for option "
        + "'--max-new-tokens': 'abc' is not an int", "(see 'longsieve run --help')");
    assertOneLine(JobTestSupport.cli("report"), "longsieve report: Missing required option: '--output=<output>'",
        "--help");
    assertOneLine(JobTestSupport.cli("generate", "--model", "m", "--max-new-tokens", "x"), "longsieve generate: ", "--help");
    assertOneLine(JobTestSupport.cli("bogus"), "longsieve: Unmatched argument at index 0: 'bogus'", "--help");
  }

  @Test
  void theEngineCommandsRefuseInOneLineToo() throws Exception {
    JobTestSupport.Cli profile = engine("profile", "--model", JobTestSupport.MODEL.toString());
    assertOneLine(profile, "longsieve-engine profile: Missing required option: '--calibration=<calibration>'", "--help");
    JobTestSupport.Cli eval = engine("eval-engine", "--model", "m", "--output", "o", "--bogus");
    assertOneLine(eval, "longsieve-engine eval-engine: Unknown option: '--bogus'", "--help");
    JobTestSupport.Cli temperature = engine("generate", "--model", JobTestSupport.MODEL.toString(), "--prompt", "Hi",
        "--temperature", "5e-324", "--device", "cpu");
    assertOneLine(temperature, "longsieve-engine generate: temperature must be 0 (greedy) or at least 1.0E-6, not 4.9E-324");
  }

  @Test
  void generateOnACorruptCheckpointIsOneLineNamingTheFile() throws Exception {
    Path model = corruptCopyOfTheTestModel();
    JobTestSupport.Cli r = JobTestSupport.cli("generate", "--model", model.toString(), "--prompt", "Hello", "--device", "cpu");
    assertOneLine(r, "longsieve generate: ", "model.safetensors");
    JobTestSupport.Cli debug = JobTestSupport.cli("generate", "--model", model.toString(), "--prompt", "Hello", "--device",
        "cpu", "--debug");
    assertEquals(2, debug.code());
    assertTrue(debug.err().contains("\tat io.longsieve."), "--debug adds the trace: " + debug.err());
  }

  @Test
  void reportOfAMissingOutputIsOneLine() {
    assertOneLine(JobTestSupport.cli("report", "--output", dir.resolve("nothing").toString(), "--master", "local[1]"),
        "longsieve report: no runs under ");
  }

  @Test
  void deviceCudaWithoutAUsableDriverIsRefusedBeforeSpark() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> LongSieveJob.checkLocalDevice("cuda", () -> "no NVIDIA driver (libcuda.so.1 not found)"));
    assertEquals("--device cuda: no NVIDIA driver (libcuda.so.1 not found) on this machine, where local mode runs the engine; "
        + "run with --device cpu or auto", e.getMessage());
    LongSieveJob.checkLocalDevice("auto", () -> "no NVIDIA driver");
    LongSieveJob.checkLocalDevice("cuda", () -> null);

    String why = CudaAvailability.unavailableReason();
    assumeTrue(why != null, "this machine has a usable GPU");
    Path in = JobTestSupport.jsonl(dir, "docs.jsonl", JobTestSupport.json("a", "summary", "One.", null));
    Path out = dir.resolve("out");
    JobTestSupport.Cli r = JobTestSupport.cli("run", "--input", in.toString(), "--output", out.toString(), "--model",
        JobTestSupport.MODEL.toString(), "--master", "local[1]", "--device", "cuda");
    assertOneLine(r, "longsieve run: --device cuda: " + why);
    assertFalse(Files.exists(out), "refused before anything was written");
  }

  private static JobTestSupport.Cli engine(String... args) {
    java.io.StringWriter so = new java.io.StringWriter();
    java.io.StringWriter se = new java.io.StringWriter();
    picocli.CommandLine cl = io.longsieve.cli.EngineCli.commandLine();
    cl.setOut(new java.io.PrintWriter(so, true));
    cl.setErr(new java.io.PrintWriter(se, true));
    return new JobTestSupport.Cli(cl.execute(args), so.toString(), se.toString());
  }

  private Path corruptCopyOfTheTestModel() throws Exception {
    Path model = Files.createDirectories(dir.resolve("model"));
    try (var files = Files.list(JobTestSupport.MODEL)) {
      for (Path f : files.toList()) Files.copy(f, model.resolve(f.getFileName()));
    }
    Path weights = model.resolve("model.safetensors");
    byte[] bytes = Files.readAllBytes(weights);
    ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).putLong(0, bytes.length * 4L); // header longer than the file
    Files.write(weights, bytes);
    return model;
  }
}
