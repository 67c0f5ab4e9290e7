package io.longsieve.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.longsieve.cuda.CudaAvailability;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** The engine commands' log lines and errors: one line each, as the job's. */
class OneLineLogFormatTest {

  static final Path MODEL = Path.of("src", "test", "resources", "models", "llama-gqa");

  private static LogRecord record(Level level, String message, Throwable thrown) {
    LogRecord r = new LogRecord(level, message);
    r.setLoggerName("io.longsieve.bootstrap.Backends");
    r.setInstant(Instant.parse("2026-12-02T18:45:07.250Z"));
    r.setThrown(thrown);
    return r;
  }

  @Test
  void aRecordIsOneLineInTheJobsFormat() {
    OneLineLogFormat f = new OneLineLogFormat(ZoneOffset.UTC);
    assertEquals("18:45:07 INFO Backends: device auto: using cpu (no CUDA device)\n",
        f.format(record(Level.INFO, "device auto: using cpu (no CUDA device)", null)));
    assertEquals("18:45:07 WARN Backends: slow\n", f.format(record(Level.WARNING, "slow", null)));
    assertEquals("18:45:07 ERROR Backends: lost\n", f.format(record(Level.SEVERE, "lost", null)));
    assertEquals("18:45:07 DEBUG Backends: detail\n", f.format(record(Level.FINE, "detail", null)));
  }

  @Test
  void anExceptionFollowsItsLineAsTheJobsPatternPrintsIt() {
    String s = new OneLineLogFormat(ZoneOffset.UTC).format(record(Level.WARNING, "failed", new IllegalStateException("x")));
    assertTrue(s.startsWith("18:45:07 WARN Backends: failed\njava.lang.IllegalStateException: x\n\tat "), s);
  }

  @Test
  void deviceCudaWhereItCannotRunIsOneLineAndExitTwo() {
    String why = CudaAvailability.unavailableReason();
    assumeTrue(why != null, "CUDA runs here");
    StringWriter err = new StringWriter();
    CommandLine cl = EngineCli.commandLine();
    cl.setErr(new PrintWriter(err, true));
    int rc = cl.execute("generate", "--model", MODEL.toString(), "--prompt", "x", "--device", "cuda");
    assertEquals(2, rc, err.toString());
    assertEquals(cl.getCommandName() + " generate: device 'cuda' requested but CUDA is unusable: " + why + "\n",
        err.toString().replace("\r", ""));
  }
}
