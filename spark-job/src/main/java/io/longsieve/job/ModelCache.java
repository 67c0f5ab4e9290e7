package io.longsieve.job;

import io.longsieve.engine.spi.EngineSpec;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.apache.spark.SparkEnv;

/**
 * Models on Hadoop file systems: a model path with a scheme ({@code hdfs:}, {@code s3a:},
 * {@code file:}, ...) is copied once to local disk before the engine opens it, since the engine
 * memory-maps its checkpoint and needs a POSIX path.
 *
 * <p>The copy goes to {@code <java.io.tmpdir>/longsieve-models/<key>}, where the key is a hash of the
 * qualified path and the newest modification time and total size of the folder's files: executors
 * on one node share a copy, and a model replaced at the same path gets a new one. A copy is made in
 * a temporary folder and renamed into place when complete, so a copy killed half-way is never used,
 * and two JVMs copying at once both end with one complete folder. Within a JVM the lookup is made
 * once per model path. Only the folder's files are copied (a checkpoint folder has no subfolders).
 *
 * <p>Failure semantics: a model that cannot be listed or copied fails the engine's opening (the task,
 * which Spark retries) with the path in the message.
 */
final class ModelCache {
  private ModelCache() {}

  private static final Logger LOG = LogManager.getLogger(ModelCache.class);
  private static final Pattern SCHEME = Pattern.compile("^[A-Za-z][A-Za-z0-9+.-]+:.*");
  private static final Map<String, String> LOCAL = new ConcurrentHashMap<>(); // model URI → local folder
  static final String COMPLETE = ".longsieve-complete";

  /** True when {@code model} names a Hadoop file system path (has a scheme), not a local folder. */
  static boolean isUri(String model) {
    return model != null && SCHEME.matcher(model).matches();
  }

  /** {@code spec} with a local copy of its model when the model is a URI; as is otherwise. */
  static EngineSpec localized(EngineSpec spec) {
    if (!isUri(spec.modelDir())) return spec;
    String local = localize(spec.modelDir(), hadoopConf());
    return new EngineSpec(local, spec.device(), spec.gpuOrdinal(), spec.threads(), spec.prefillChunk(), spec.maxContext(),
        spec.memoryFraction(), spec.defaultPolicy(), spec.maxBatch(), spec.kvBudgetBytes(), spec.prefixCacheBytes());
  }

  /** The local folder holding a copy of {@code model} (copied now if this node has none). */
  static String localize(String model, Configuration conf) {
    return LOCAL.computeIfAbsent(model, m -> copy(m, conf, java.nio.file.Path.of(System.getProperty("java.io.tmpdir"),
        "longsieve-models")));
  }

  static String copy(String model, Configuration conf, java.nio.file.Path root) {
    try {
      Path src = new Path(model);
      FileSystem fs = src.getFileSystem(conf);
      FileStatus[] files = fs.listStatus(src, p -> !p.getName().startsWith("."));
      long newest = 0;
      long bytes = 0;
      for (FileStatus f : files) {
        if (!f.isFile()) continue;
        newest = Math.max(newest, f.getModificationTime());
        bytes += f.getLen();
      }
      String qualified = fs.makeQualified(src).toString();
      java.nio.file.Path dest = root.resolve(key(qualified, newest, bytes));
      if (Files.exists(dest.resolve(COMPLETE))) {
        LOG.info("model {}: using the local copy {}", qualified, dest);
        return dest.toString();
      }
      Files.createDirectories(root);
      java.nio.file.Path tmp = Files.createTempDirectory(root, "copy-");
      long t0 = System.nanoTime();
      for (FileStatus f : files) {
        if (!f.isFile()) continue;
        try (InputStream in = fs.open(f.getPath())) {
          Files.copy(in, tmp.resolve(f.getPath().getName()), StandardCopyOption.REPLACE_EXISTING);
        }
      }
      Files.writeString(tmp.resolve(COMPLETE), qualified + "\n", StandardCharsets.UTF_8);
      try {
        Files.move(tmp, dest, StandardCopyOption.ATOMIC_MOVE);
        LOG.info("model {}: copied {} bytes to {} in {} s", qualified, bytes, dest,
            String.format(java.util.Locale.ROOT, "%.1f", (System.nanoTime() - t0) / 1e9));
      } catch (FileAlreadyExistsException | DirectoryNotEmptyException | AtomicMoveNotSupportedException e) {
        deleteTree(tmp); // another JVM on this node finished first
        if (!Files.exists(dest.resolve(COMPLETE))) throw new IOException("could not place the copy at " + dest, e);
      }
      return dest.toString();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot copy the model " + model + " to local disk: " + e.getMessage(), e);
    }
  }

  static String key(String qualified, long newestMtime, long bytes) {
    try {
      byte[] h = MessageDigest.getInstance("SHA-256")
          .digest((qualified + "|" + newestMtime + "|" + bytes).getBytes(StandardCharsets.UTF_8));
      return HexFormat.of().formatHex(h, 0, 8);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** On an executor: Spark's Hadoop settings (spark.hadoop.* included); elsewhere the defaults. */
  private static Configuration hadoopConf() {
    SparkEnv env = SparkEnv.get();
    return env == null ? new Configuration() : org.apache.spark.deploy.SparkHadoopUtil.get().newConfiguration(env.conf());
  }

  private static void deleteTree(java.nio.file.Path p) throws IOException {
    try (Stream<java.nio.file.Path> s = Files.walk(p)) {
      for (java.nio.file.Path q : s.sorted(Comparator.reverseOrder()).toList()) Files.deleteIfExists(q);
    }
  }

  /** Forgets this JVM's lookups (tests). */
  static void forget() {
    LOCAL.clear();
  }
}
