package io.longsieve.job;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Collectors;
import org.apache.spark.sql.SparkSession;

/**
 * Spark's local-cluster mode for tests: a master and N workers inside the test JVM, and every
 * executor a separate JVM, so tests can kill executors and see real task retries.
 *
 * <p>The workers start executors from SPARK_HOME (set by surefire to target/spark-home): Spark's
 * launcher only needs a RELEASE file and a jars/ folder there, since the executors get this JVM's
 * class path through spark.executor.extraClassPath. The folder is made here, not committed.
 */
final class LocalCluster {
  private LocalCluster() {}

  /** Builds the minimal Spark home the workers launch executors from. */
  static void prepareSparkHome() {
    String home = System.getenv("SPARK_HOME");
    if (home == null) throw new IllegalStateException("SPARK_HOME is not set (surefire sets it for spark-job tests)");
    try {
      Path h = Path.of(home);
      Files.createDirectories(h.resolve("jars"));
      if (!Files.exists(h.resolve("RELEASE"))) {
        Files.writeString(h.resolve("RELEASE"), "Spark for LongSieve tests: executors use the test class path\n");
      }
      // each worker "has" one GPU, so that GPU scheduling and stage-level profiles run without one
      Path gpus = h.resolve("fake-gpus.sh");
      Files.writeString(gpus, "#!/bin/sh\necho '{\"name\": \"gpu\", \"addresses\": [\"0\"]}'\n");
      gpus.toFile().setExecutable(true);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * A session on local-cluster[executors, 1 core, 1024 MB]; the executors run with this JVM's flags and
   * each holds one pretend GPU (address "0", from a discovery script that just prints it).
   */
  static SparkSession session(int executors) {
    prepareSparkHome();
    String flags = executorFlags();
    return SparkSession.builder()
        .master("local-cluster[" + executors + ",1,1024]")
        .appName("longsieve-local-cluster-test")
        .config("spark.ui.enabled", "false")
        .config("spark.executor.extraClassPath", System.getProperty("java.class.path"))
        .config("spark.executor.extraJavaOptions", flags)
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.task.maxFailures", "4")
        // a lost executor is noticed from its closed connection at once; the heartbeat timeout is a backstop
        .config("spark.network.timeout", "60s")
        // one (pretend) GPU per worker and executor; tasks claim a share only where a profile asks
        .config("spark.worker.resource.gpu.amount", "1")
        .config("spark.worker.resource.gpu.discoveryScript", System.getenv("SPARK_HOME") + "/fake-gpus.sh")
        .config("spark.executor.resource.gpu.amount", "1")
        .getOrCreate();
  }

  /** This JVM's flags that executor JVMs need too (module opens, Vector API, temp and DJL cache folders). */
  static String executorFlags() {
    return ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
        .filter(a -> a.startsWith("--add-opens") || a.startsWith("--add-modules") || a.startsWith("-DDJL_CACHE_DIR")
            || a.startsWith("-Djava.io.tmpdir") || a.startsWith("-Xss") || a.startsWith("-Djdk.reflect")
            || a.startsWith("-Dio.netty"))
        .collect(Collectors.joining(" "));
  }

  /** Process ids of this application's executor JVMs (Linux: read from /proc, whose command lines are not cut). */
  static List<Long> executorPids(SparkSession spark) {
    String app = spark.sparkContext().applicationId();
    return ProcessHandle.current().descendants()
        .map(ProcessHandle::pid)
        .filter(pid -> {
          String cmd = commandLine(pid);
          return cmd.contains("CoarseGrainedExecutorBackend") && cmd.contains(app);
        })
        .sorted()
        .collect(Collectors.toList());
  }

  /** The process's arguments joined by spaces, or "" when it is gone. */
  static String commandLine(long pid) {
    try {
      return new String(Files.readAllBytes(Path.of("/proc", Long.toString(pid), "cmdline")),
          java.nio.charset.StandardCharsets.UTF_8).replace('\0', ' ');
    } catch (IOException e) {
      return "";
    }
  }
}
