package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cuda.CudaAvailability;
import io.longsieve.policy.PolicySpec;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * What {@code longsieve run} refuses before Spark starts: one line on stderr, exit 2, nothing under
 * the output root (not even _staging), the stack trace only with --debug.
 */
class RunChecksTest {

  @TempDir
  Path dir;

  /** exit code, stdout, stderr of {@code longsieve run ARGS} with the test model unless --model is given. */
  private String[] cli(String... args) {
    StringWriter so = new StringWriter();
    StringWriter se = new StringWriter();
    CommandLine cl = JobCli.commandLine();
    cl.setOut(new PrintWriter(so, true));
    cl.setErr(new PrintWriter(se, true));
    boolean model = java.util.Arrays.asList(args).contains("--model");
    String[] common = model ? new String[] {"run", "--master", "local[2]", "--device", "cpu"}
        : new String[] {"run", "--model", JobTestSupport.MODEL.toString(), "--master", "local[2]", "--device", "cpu"};
    String[] all = new String[common.length + args.length];
    System.arraycopy(common, 0, all, 0, common.length);
    System.arraycopy(args, 0, all, common.length, args.length);
    return new String[] {Integer.toString(cl.execute(all)), so.toString(), se.toString()};
  }

  private Path input() {
    return JobTestSupport.jsonl(dir, "docs.jsonl", JobTestSupport.json("a", "summary", "One.", null));
  }

  private static void assertOneLineRefusal(String[] r, String start) {
    assertEquals("2", r[0], r[2]);
    assertTrue(r[2].startsWith("longsieve run: " + start), r[2]);
    assertEquals(1, r[2].strip().lines().count(), "one line: " + r[2]);
  }

  @Test
  void anOutputThatIsAFileIsRefusedInOneLine() throws Exception {
    Path file = Files.writeString(dir.resolve("out.txt"), "not a folder");
    assertOneLineRefusal(cli("--input", input().toString(), "--output", file.toString()),
        "--output " + file + " is a file, not a folder");
  }

  @Test
  void aCorruptCheckpointIsFoundOnTheDriverNamingTheFile() throws Exception {
    Path model = Files.createDirectories(dir.resolve("model"));
    try (var files = Files.list(JobTestSupport.MODEL)) {
      for (Path f : files.toList()) Files.copy(f, model.resolve(f.getFileName()));
    }
    Path weights = model.resolve("model.safetensors");
    byte[] bytes = Files.readAllBytes(weights);
    ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).putLong(0, bytes.length * 4L); // header longer than the file
    Files.write(weights, bytes);
    Path out = dir.resolve("out");
    String[] r = cli("--model", model.toString(), "--input", input().toString(), "--output", out.toString());
    assertOneLineRefusal(r, "model " + model + ": ");
    assertTrue(r[2].contains("model.safetensors"), r[2]);
    assertFalse(Files.exists(out), "nothing written under the output");
  }

  @Test
  void aQuantizationMethodTheEngineDoesNotReadIsRefusedOnTheDriver() throws Exception {
    Path model = Files.createDirectories(dir.resolve("awq"));
    try (var files = Files.list(JobTestSupport.MODEL)) {
      for (Path f : files.toList()) Files.copy(f, model.resolve(f.getFileName()));
    }
    Path config = model.resolve("config.json");
    Files.writeString(config, Files.readString(config).replaceFirst("\\{",
        "{\"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 4},"));
    Path out = dir.resolve("out");
    String[] r = cli("--model", model.toString(), "--input", input().toString(), "--output", out.toString());
    assertOneLineRefusal(r, "model " + model + ": ");
    assertTrue(r[2].contains("quant_method 'awq' is not supported"), r[2]);
    assertFalse(Files.exists(out), "nothing written under the output");
  }

  @Test
  void aPolicyLayerBeyondTheModelIsRefusedBeforeSparkStarts() {
    Path out = dir.resolve("out");
    String[] r = cli("--input", input().toString(), "--output", out.toString(), "--policy", "tsa:layers=99");
    assertOneLineRefusal(r, "policy tsa:");
    assertTrue(r[2].contains("layers=99 names layer 99, but the model has numLayers 4"), r[2]);
    assertFalse(Files.exists(out));
  }

  @Test
  void aPolicyCountBeyondTheModelIsRefusedBeforeSparkStarts() {
    Path out = dir.resolve("out");
    String[] r = cli("--input", input().toString(), "--output", out.toString(), "--policy", "quest:dense_layers=9");
    assertOneLineRefusal(r, "policy ");
    assertTrue(r[2].contains("dense_layers") && r[2].contains("4"), "names the parameter and the model's layers: " + r[2]);
    assertFalse(Files.exists(out));
  }

  @Test
  void deviceCudaOnABuildWithoutKernelsIsRefusedInOneLine() {
    // the build of a machine without nvcc (build-fatbin.sh skips the kernels); this test's build has them
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> LongSieveJob.checkDevice("cuda", false));
    assertEquals("--device cuda: " + CudaAvailability.NO_KERNELS, e.getMessage());
    assertTrue(e.getMessage().contains("this build has no CUDA kernels"), e.getMessage());
    LongSieveJob.checkDevice("auto", false); // auto falls back to the CPU on the executors
    LongSieveJob.checkDevice("cpu", false);
    LongSieveJob.checkDevice("cuda", true); // whether the executors have a GPU is theirs to say
  }
  @Test
  void aTsaChunkTheCudaEngineCannotHoldIsRefusedBeforeSparkStarts() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> LongSieveJob.checkTsaChunk("cuda", PolicySpec.parse("tsa:chunk=8192"), 512));
    assertTrue(e.getMessage().contains("tsa:chunk=8192") && e.getMessage().contains("8192"), e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> LongSieveJob.checkTsaChunk("cuda", PolicySpec.parse("tsa:chunk=0"), 512));
    LongSieveJob.checkTsaChunk("cuda", PolicySpec.parse("tsa:chunk=8192"), 8192);  // the engine's chunk holds it
    LongSieveJob.checkTsaChunk("cuda", PolicySpec.parse("tsa"), 512);              // the default fits any setting
    LongSieveJob.checkTsaChunk("auto", PolicySpec.parse("tsa:chunk=0"), 512);      // the CPU may run it
    LongSieveJob.checkTsaChunk("cuda", PolicySpec.parse("tokenselect"), 16);       // no TSA
  }


  @Test
  void debugPrintsTheStackTraceAfterTheLine() {
    String[] r = cli("--input", input().toString(), "--output", dir.resolve("out").toString(), "--policy",
        "tsa:layers=99", "--debug");
    assertEquals("2", r[0]);
    assertTrue(r[2].startsWith("longsieve run: policy tsa:"), r[2]);
    assertTrue(r[2].contains("\tat io.longsieve."), "the trace follows: " + r[2]);
  }

  @Test
  void mixedInputFormatsAreRefusedInOneLine() throws Exception {
    Path in = Files.createDirectories(dir.resolve("in"));
    JobTestSupport.jsonl(in, "a.jsonl", JobTestSupport.json("a", "summary", "A.", null));
    Files.write(in.resolve("b.parquet"), "PAR1 not really".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
    assertOneLineRefusal(cli("--input", in.toString(), "--output", dir.resolve("out").toString()),
        "input " + in + " mixes Parquet files (b.parquet) and JSONL files (a.jsonl)");
  }
}
