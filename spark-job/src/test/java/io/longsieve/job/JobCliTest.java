package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** The top command: its subcommands, and the engine's generate reachable through it. */
class JobCliTest {

  @Test
  void runAndGenerateAreSubcommands() {
    CommandLine cl = JobCli.commandLine();
    assertTrue(cl.getSubcommands().containsKey("run"));
    assertTrue(cl.getSubcommands().containsKey("generate"));
  }

  @Test
  void generateRunsTheEngineAloneThroughJobCli() {
    PrintStream saved = System.out;
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    int rc;
    try {
      System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8)); // generate prints to System.out
      rc = JobCli.commandLine().execute("generate", "--model", JobTestSupport.MODEL.toString(), "--prompt", "Hello",
          "--max-new-tokens", "3", "--device", "cpu", "--threads", "1");
    } finally {
      System.setOut(saved);
    }
    assertEquals(0, rc);
    assertFalse(captured.toString(StandardCharsets.UTF_8).isEmpty(), "the generated text is printed");
  }
}
