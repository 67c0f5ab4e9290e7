package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** One writer per output: the lock, its holder's record, takeover after a kill, run ids reserved once. */
class OutputLockTest {

  @TempDir
  Path dir;

  private RunOptions options(Path out, String runId) {
    return JobTestSupport.options(dir, out, runId, Map.of());
  }

  private static OutputLock acquire(RunOptions o) {
    return OutputLock.acquire(o, new Configuration());
  }

  @Test
  void aSecondRunOnTheSameOutputIsRefusedWithTheHoldersRunIdAndStartUntilTheFirstEnds() {
    Path out = dir.resolve("out");
    try (OutputLock first = acquire(options(out, "first"))) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> acquire(options(out, "second")));
      assertTrue(e.getMessage().startsWith("--output " + out + " is in use by run first (started 20"), e.getMessage());
      assertTrue(e.getMessage().contains("pid " + ProcessHandle.current().pid()), e.getMessage());
      assertTrue(e.getMessage().endsWith("; one run at a time per output"), e.getMessage());
    }
    try (OutputLock second = acquire(options(out, "second"))) {
      assertTrue(Files.exists(out.resolve("runs").resolve("second.started")));
    }
  }

  @Test
  void aRunIdIsReservedOnceEvenIfItsRunNeverWroteAnything() {
    Path out = dir.resolve("out");
    acquire(options(out, "same")).close();
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> acquire(options(out, "same")));
    assertEquals("run id 'same' was already used under " + out + " (" + out.resolve("runs").resolve("same.started")
        + " exists); choose another --run-id", e.getMessage());
  }

  @Test
  void anOutputThatIsAFileOrCannotBeCreatedIsRefusedInOneLine() throws Exception {
    Path file = Files.writeString(dir.resolve("a-file"), "x");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> acquire(options(file, "r")));
    assertEquals("--output " + file + " is a file, not a folder", e.getMessage());
    Path under = file.resolve("out");
    e = assertThrows(IllegalArgumentException.class, () -> acquire(options(under, "r")));
    assertTrue(e.getMessage().startsWith("--output " + under + " is not a writable folder: "), e.getMessage());
    assertTrue(!e.getMessage().contains("\n"), e.getMessage());
  }

  @Test
  void aLockHeldByAnotherProcessRefusesAndIsTakenOverOnceThatProcessIsKilled() throws Exception {
    Path out = dir.resolve("out");
    Process holder = new ProcessBuilder(ProcessHandle.current().info().command().orElse("java"), "-cp",
        System.getProperty("java.class.path"), Holder.class.getName(), dir.toString(), out.toString())
        .redirectErrorStream(true).start();
    try {
      BufferedReader r = new BufferedReader(new InputStreamReader(holder.getInputStream(), StandardCharsets.UTF_8));
      String line;
      while ((line = r.readLine()) != null && !line.equals("locked")) {
        // the child's log lines
      }
      assertEquals("locked", line, "the child took the lock");
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> acquire(options(out, "mine")));
      assertTrue(e.getMessage().contains("is in use by run child ") && e.getMessage().contains("pid " + holder.pid()),
          e.getMessage());
    } finally {
      holder.destroyForcibly().waitFor(30, TimeUnit.SECONDS); // kill -9: no shutdown hook releases anything
    }
    assertTrue(Files.exists(out.resolve(OutputLock.FILE)), "the dead holder's file is still there");
    try (OutputLock taken = acquire(options(out, "mine"))) {
      String record = Files.readString(out.resolve(OutputLock.FILE));
      assertTrue(record.contains("\"run_id\":\"mine\""), record);
    }
  }

  /** The output under another Hadoop scheme (stores like HDFS or S3A), in this test's folder. */
  private RunOptions onStore(String scheme, String runId) {
    return JobTestSupport.options(dir, dir, runId, Map.of("spark.longsieve.output", scheme + "://" + dir.resolve("out")));
  }

  @Test
  void onAStoreWithoutOsLocksTheLockIsAFileCreatedOnceAndDeletedAtTheEnd() throws Exception {
    Configuration conf = SharedStoreFileSystem.configuration();
    Path lockFile = dir.resolve("out").resolve(OutputLock.FILE);
    try (OutputLock first = OutputLock.acquire(onStore("sharedtest", "first"), conf)) {
      assertTrue(Files.readString(lockFile).contains("\"run_id\":\"first\""), "the file records its holder");
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> OutputLock.acquire(onStore("sharedtest", "second"), conf));
      assertTrue(e.getMessage().contains("is in use by run first (started 20"), e.getMessage());
      assertTrue(e.getMessage().contains("if that run is no longer running, delete sharedtest:"), e.getMessage());
      assertTrue(!e.getMessage().contains("\n"), e.getMessage());
    }
    assertTrue(!Files.exists(lockFile), "released: the file is gone");
    try (OutputLock second = OutputLock.acquire(onStore("sharedtest", "second"), conf)) {
      assertTrue(Files.exists(dir.resolve("out").resolve("runs").resolve("second.started")));
    }
    IllegalArgumentException again = assertThrows(IllegalArgumentException.class,
        () -> OutputLock.acquire(onStore("sharedtest", "second"), conf));
    assertTrue(again.getMessage().startsWith("run id 'second' was already used under sharedtest:"), again.getMessage());
  }

  @Test
  void aRunKilledHardOnAStoreLeavesItsLockAndTheNextRunIsToldWhichFileToDelete() throws Exception {
    Configuration conf = SharedStoreFileSystem.configuration();
    OutputLock.acquire(onStore("sharedtest", "killed"), conf); // never closed: its JVM "died"
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> OutputLock.acquire(onStore("sharedtest", "next"), conf));
    assertTrue(e.getMessage().contains("in use by run killed") && e.getMessage().contains(OutputLock.FILE), e.getMessage());
    Files.delete(dir.resolve("out").resolve(OutputLock.FILE)); // what the message tells the operator to do
    OutputLock.acquire(onStore("sharedtest", "next"), conf).close();
  }

  @Test
  void aReadOnlyOutputIsRefusedInOneLineBeforeAnythingIsWritten() throws Exception {
    Files.createDirectories(dir.resolve("out"));
    Configuration conf = SharedStoreFileSystem.configuration();
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> OutputLock.acquire(onStore("readonlytest", "r"), conf));
    assertTrue(e.getMessage().startsWith("--output readonlytest:") && e.getMessage().contains(
        dir.resolve("out") + " is not a writable folder: "), e.getMessage());
    assertTrue(e.getMessage().contains("Permission denied"), e.getMessage());
    assertTrue(!e.getMessage().contains("\n"), e.getMessage());
    try (var files = Files.list(dir.resolve("out"))) {
      assertEquals(0, files.count(), "nothing written");
    }
  }

  /** Holds an output's lock in its own JVM until killed. */
  static final class Holder {
    public static void main(String[] args) throws Exception {
      RunOptions o = JobTestSupport.options(Path.of(args[0]), Path.of(args[1]), "child", Map.of());
      OutputLock lock = OutputLock.acquire(o, new Configuration());
      System.out.println("locked");
      System.out.flush();
      Thread.sleep(TimeUnit.MINUTES.toMillis(5));
      lock.close();
    }
  }

  @Test
  void describeReadsAHalfWrittenRecordAsUnknown() {
    assertEquals("another run (its record is not readable yet)", OutputLock.describe("{\"run_".getBytes(StandardCharsets.UTF_8)));
    assertEquals("run r (started t, host h, pid 1)",
        OutputLock.describe("{\"run_id\":\"r\",\"host\":\"h\",\"pid\":1,\"start\":\"t\"}".getBytes(StandardCharsets.UTF_8)));
  }
}
