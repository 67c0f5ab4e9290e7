package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cli.EngineCli;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** What a new user reads: the top-level help, run's key list, the engine's program name, a mistyped run id. */
class CliHelpTest {

  static String usage(CommandLine cl) {
    StringWriter w = new StringWriter();
    cl.usage(new PrintWriter(w, true));
    return w.toString();
  }

  @Test
  void topLevelHelpListsEveryCommand() {
    String help = usage(JobCli.commandLine());
    for (String c : new String[] {"run", "report", "generate", "eval", "bench", "profile", "eval-engine", "inspect"}) {
      assertTrue(help.contains("  " + c + " "), c + " in\n" + help);
    }
  }

  @Test
  void runHelpHidesTheTestOnlyKeysAndListsTheNewOnes() {
    String help = usage(JobCli.commandLine().getSubcommands().get("run"));
    assertFalse(help.contains("spark.longsieve.test."), help);
    for (String k : new String[] {"--max-total-tokens", "--max-docs", "--audit-fraction", "spark.longsieve.resourceWaitSeconds",
        "spark.longsieve.auditSeed"}) {
      assertTrue(help.contains(k), k);
    }
  }

  @Test
  void theEngineCommandsUseTheLaunchersName() {
    String saved = System.getProperty("longsieve.program");
    try {
      System.setProperty("longsieve.program", "longsieve");
      String help = usage(EngineCli.commandLine().getSubcommands().get("generate"));
      assertTrue(help.contains("Usage: longsieve generate"), help);
    } finally {
      if (saved == null) System.clearProperty("longsieve.program");
      else System.setProperty("longsieve.program", saved);
    }
  }

  @Test
  void reportOfAnUnknownRunIsOneLineAndExitCode2(@TempDir Path dir) throws Exception {
    Files.createDirectories(dir.resolve("runs"));
    PrintStream saved = System.err;
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int rc;
    try {
      System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
      rc = JobCli.commandLine().execute("report", "--output", dir.toString(), "--run-id", "nosuch", "--master", "local[1]");
    } finally {
      System.setErr(saved);
    }
    assertEquals(2, rc);
    String lines = err.toString(StandardCharsets.UTF_8).lines()
        .filter(l -> l.startsWith("longsieve report:")).findFirst().orElse("");
    assertTrue(lines.contains("no run nosuch"), err.toString(StandardCharsets.UTF_8));
    assertFalse(err.toString(StandardCharsets.UTF_8).contains("\tat "), "no stack trace: " + err);
  }
}
