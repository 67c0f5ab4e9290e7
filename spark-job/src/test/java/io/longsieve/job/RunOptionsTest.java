package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.policy.PolicySpec;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** Options: defaults, layering, and what is refused before Spark starts. */
class RunOptionsTest {

  private static Map<String, String> minimal() {
    Map<String, String> m = new LinkedHashMap<>();
    m.put("spark.longsieve.input", "in.jsonl");
    m.put("spark.longsieve.output", "out");
    return m;
  }

  @Test
  void defaultsApplyWhenOnlyInputAndOutputAreGiven() {
    RunOptions o = RunOptions.fromSettings(minimal());
    assertEquals("local[*]", o.master());
    assertEquals(64, o.maxNewTokens());
    assertEquals(PolicySpec.DENSE, o.policy());
    assertEquals("auto", o.device());
    assertFalse(o.truncate());
    assertTrue(o.model().endsWith("models/longsieve-needle-7m"), o.model());
    assertTrue(RunOptions.RUN_ID.matcher(o.runId()).matches());
  }

  @Test
  void defaultRunIdIsTheUtcTimeToTheSecond() {
    assertEquals("20261129T083000Z", RunOptions.defaultRunId(Instant.parse("2026-11-29T08:30:00.456Z")));
  }

  @Test
  void anUnknownLongsieveKeyIsRejectedWithTheKnownKeys() {
    Map<String, String> m = minimal();
    m.put("spark.longsieve.maxNewToken", "32");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> RunOptions.fromSettings(m));
    assertTrue(e.getMessage().startsWith("unknown option 'spark.longsieve.maxNewToken'; known keys:"), e.getMessage());
    assertTrue(e.getMessage().contains("spark.longsieve.maxNewTokens (default 64)"), e.getMessage());
  }

  @Test
  void aRunIdOutsideTheSafeCharactersIsRefused() {
    Map<String, String> m = minimal();
    m.put("spark.longsieve.runId", "../etc");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> RunOptions.fromSettings(m));
    assertEquals("run id '../etc' is not allowed: use 1 to 64 of A-Z a-z 0-9 _ - (it becomes a folder name and a"
        + " partition value)", e.getMessage());
  }

  @Test
  void aRunIdOver64CharactersIsRefused() {
    assertThrows(IllegalArgumentException.class, () -> RunOptions.checkRunId("a".repeat(65)));
    RunOptions.checkRunId("a".repeat(64));
  }

  @Test
  void otherSparkSettingsPassThroughToTheSession() {
    Map<String, String> m = minimal();
    m.put("spark.executor.memory", "8g");
    m.put("spark.master", "yarn");
    RunOptions o = RunOptions.fromSettings(m);
    assertEquals(Map.of("spark.executor.memory", "8g"), o.sparkConf());
    assertEquals("yarn", o.master());
  }

  @Test
  void aNonNumberForANumericOptionIsRefused() {
    Map<String, String> m = minimal();
    m.put("spark.longsieve.maxNewTokens", "lots");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> RunOptions.fromSettings(m));
    assertEquals("spark.longsieve.maxNewTokens must be an integer, not 'lots'", e.getMessage());
  }

  @Test
  void theEnginesShareOfGpuMemoryReachesItsSpecAndMustBeAFraction() {
    assertEquals(0.9, RunOptions.fromSettings(minimal()).engineSpec().memoryFraction());
    Map<String, String> m = minimal();
    m.put("spark.longsieve.gpuMemoryFraction", "0.4");
    assertEquals(0.4, RunOptions.fromSettings(m).engineSpec().memoryFraction());
    m.put("spark.longsieve.gpuMemoryFraction", "1.5");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> RunOptions.fromSettings(m));
    assertEquals("spark.longsieve.gpuMemoryFraction must be in (0, 1], not 1.5", e.getMessage());
  }

  @Test
  void anUnknownPolicyIsRefusedOnTheDriver() {
    Map<String, String> m = minimal();
    m.put("spark.longsieve.policy", "magic");
    assertThrows(IllegalArgumentException.class, () -> RunOptions.fromSettings(m));
  }

  @Test
  void flagsOverrideConfOverridesTheConfFile(@TempDir Path dir) throws IOException {
    Path file = dir.resolve("run.properties");
    Files.writeString(file, "spark.longsieve.maxNewTokens=8\nspark.longsieve.device=cpu\nspark.longsieve.threads=3\n");
    RunCommand cmd = new RunCommand();
    new CommandLine(cmd).parseArgs("--input", "in.jsonl", "--output", "out", "--conf-file", file.toString(),
        "--conf", "spark.longsieve.maxNewTokens=16", "--conf", "spark.longsieve.threads=2", "--max-new-tokens", "32");
    RunOptions o = RunOptions.fromSettings(cmd.settings());
    assertEquals(32, o.maxNewTokens(), "the flag wins over --conf and the file");
    assertEquals(2, o.threads(), "--conf wins over the file");
    assertEquals("cpu", o.device(), "the file wins over the default");
  }

  @Test
  void theRunCommandRefusesAnUnknownConfKeyWithExitCode2(@TempDir Path dir) {
    java.io.StringWriter err = new java.io.StringWriter();
    CommandLine cl = JobCli.commandLine();
    cl.setErr(new java.io.PrintWriter(err));
    int rc = cl.execute("run", "--input", "in.jsonl", "--output", dir.toString(), "--conf", "spark.longsieve.colour=red");
    assertEquals(RunCommand.CONFIG_ERROR, rc);
    assertTrue(err.toString().contains("unknown option 'spark.longsieve.colour'; known keys:"), err.toString());
  }

  @Test
  void theRunCommandRefusesABadRunIdWithExitCode2(@TempDir Path dir) {
    java.io.StringWriter err = new java.io.StringWriter();
    CommandLine cl = JobCli.commandLine();
    cl.setErr(new java.io.PrintWriter(err));
    int rc = cl.execute("run", "--input", "in.jsonl", "--output", dir.toString(), "--run-id", "run 1");
    assertEquals(RunCommand.CONFIG_ERROR, rc);
    assertTrue(err.toString().contains("run id 'run 1' is not allowed"), err.toString());
  }

  // ---- prompts and sampling, run level ----

  @Test
  void generationDefaultsAreGreedyWithTheTaskPresets() {
    GenerationOptions g = RunOptions.fromSettings(minimal()).generation();
    assertEquals(null, g.promptTemplate());
    assertEquals(0.0, g.temperature());
    assertEquals(1.0, g.topP());
    assertEquals(java.util.List.of(), g.stop());
    assertFalse(g.raw());
  }

  @Test
  void samplingKeysAndAJsonArrayOfStopStringsAreRead() {
    Map<String, String> m = minimal();
    m.put("spark.longsieve.temperature", "0.8");
    m.put("spark.longsieve.topP", "0.9");
    m.put("spark.longsieve.seed", "-3");
    m.put("spark.longsieve.stop", "[\"\\n\\n\", \"END\"]");
    m.put("spark.longsieve.system", "Be brief.");
    GenerationOptions g = RunOptions.fromSettings(m).generation();
    assertEquals(0.8, g.temperature());
    assertEquals(0.9, g.topP());
    assertEquals(-3L, g.seed());
    assertEquals(java.util.List.of("\n\n", "END"), g.stop());
    assertEquals("Be brief.", g.system());
    RunOptions again = RunOptions.fromSettings(RunOptions.fromSettings(m).asSettings());
    assertEquals(g.stop(), again.generation().stop(), "the manifest's settings read back the same");
    m.put("spark.longsieve.topP", "0");
    assertEquals("spark.longsieve.topP must be in (0, 1], not 0.0",
        assertThrows(IllegalArgumentException.class, () -> RunOptions.fromSettings(m)).getMessage());
  }

  @Test
  void aBadRunTemplateIsRefusedNamingTheKey() {
    Map<String, String> m = minimal();
    m.put("spark.longsieve.promptTemplate", "Summarise {text");
    assertEquals("spark.longsieve.promptTemplate: unbalanced '{' at character 10 of the prompt template (write {{ for a literal brace)",
        assertThrows(IllegalArgumentException.class, () -> RunOptions.fromSettings(m)).getMessage());
  }

  @Test
  void theRunCommandRefusesABadTemplateFileInOneLineBeforeSparkStarts(@TempDir Path dir) throws IOException {
    Path t = Files.writeString(dir.resolve("t.txt"), "Summarise {the text}");
    java.io.StringWriter err = new java.io.StringWriter();
    CommandLine cl = JobCli.commandLine();
    cl.setErr(new java.io.PrintWriter(err));
    int rc = cl.execute("run", "--input", "in.jsonl", "--output", dir.toString(), "--prompt-template", t.toString());
    assertEquals(RunCommand.CONFIG_ERROR, rc);
    assertEquals("longsieve run: --prompt-template " + t + ": placeholder {the text} at character 10 of the prompt "
        + "template is not a column name (letters, digits, _)", err.toString().strip());
    assertTrue(org.apache.spark.sql.SparkSession.getActiveSession().isEmpty(), "no Spark session was started");
  }

  @Test
  void theRunCommandsSamplingFlagsReachTheOptions(@TempDir Path dir) throws IOException {
    Path t = Files.writeString(dir.resolve("t.txt"), "Q: {question}\n{text}");
    RunCommand c = new RunCommand();
    new CommandLine(c).parseArgs("--input", "in.jsonl", "--output", "out", "--prompt-template", t.toString(),
        "--temperature", "0.5", "--top-p", "0.8", "--seed", "9", "--stop", "\n", "--stop", "END", "--system", "S", "--raw");
    GenerationOptions g = RunOptions.fromSettings(c.settings()).generation();
    assertEquals(java.util.Set.of("question", "text"), g.promptTemplate().placeholders());
    assertEquals(0.5, g.temperature());
    assertEquals(0.8, g.topP());
    assertEquals(9L, g.seed());
    assertEquals(java.util.List.of("\n", "END"), g.stop(), "white space survives the settings");
    assertEquals("S", g.system());
    assertTrue(g.raw());
  }
  @Test
  void prefixReuseIsOnByDefaultAndTheOptionOrTheFlagTurnsItOff() {
    RunOptions on = RunOptions.fromSettings(minimal());
    assertEquals(io.longsieve.engine.spi.EngineSpec.PREFIX_CACHE_DEFAULT, on.engineSpec().prefixCacheBytes());
    Map<String, String> m = minimal();
    m.put("spark.longsieve.prefixCacheMb", "64");
    assertEquals(64L << 20, RunOptions.fromSettings(m).engineSpec().prefixCacheBytes());
    m.put("spark.longsieve.prefixReuse", "false");
    RunOptions off = RunOptions.fromSettings(m);
    assertEquals(0, off.engineSpec().prefixCacheBytes());
    assertEquals("false", off.asSettings().get("spark.longsieve.prefixReuse"));
    m.put("spark.longsieve.prefixReuse", "sometimes");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> RunOptions.fromSettings(m));
    assertEquals("spark.longsieve.prefixReuse must be true or false, not 'sometimes'", e.getMessage());
    RunCommand cmd = new RunCommand();
    new CommandLine(cmd).parseArgs("--input", "in.jsonl", "--output", "out", "--no-prefix-reuse");
    assertEquals(0, RunOptions.fromSettings(cmd.settings()).engineSpec().prefixCacheBytes());
  }
}
