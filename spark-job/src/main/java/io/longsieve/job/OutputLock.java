package io.longsieve.job;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;

/**
 * One writer per output root: {@code <out>/_longsieve.lock}, held for the whole run, and the run
 * id reserved as {@code <out>/runs/<run_id>.started}. Taken before Spark starts, so a second run is
 * refused before it touches {@code _staging}, and every start-up cleanup ({@link Resume#cleanStale})
 * runs while no other run can be live on this output.
 *
 * <p>On a local or NFS disk the lock is the operating system's ({@link FileChannel#tryLock}): it dies
 * with the process, so after a kill -9 the file is still there but unlocked, and the next run takes
 * it over. The file is never deleted (a run that deleted it on exit could race one that had just
 * opened it); it only holds a record of the last holder: run id, host, pid, start time.
 *
 * <p>On other Hadoop file systems (HDFS, S3A) there is no OS lock: the lock is the file itself,
 * created with overwrite=false (atomic on HDFS) and deleted on exit. A run killed hard leaves it;
 * nothing can prove that holder gone, so the next run is refused with the holder and the file to
 * delete once that run is known to be dead.
 */
final class OutputLock implements AutoCloseable {

  private static final Logger LOG = LogManager.getLogger(OutputLock.class);
  static final String FILE = "_longsieve.lock";
  private static final ObjectMapper JSON = new ObjectMapper();

  private final FileChannel channel;           // local: the open, locked lock file; null elsewhere
  private final FileLock lock;
  private final java.nio.file.Path localFile;  // local: its key in HELD_HERE
  private final FileSystem fs;                 // elsewhere: where to delete the lock file on close
  private final Path file;

  private OutputLock(FileChannel channel, FileLock lock, java.nio.file.Path localFile, FileSystem fs, Path file) {
    this.channel = channel;
    this.lock = lock;
    this.localFile = localFile;
    this.fs = fs;
    this.file = file;
  }

  /**
   * Takes the output's lock, checks the output is a writable folder and reserves the run id.
   *
   * @throws IllegalArgumentException one line for the user: the output is a file or not writable,
   *     another run holds it (named, with its start time), or the run id was already used
   */
  static OutputLock acquire(RunOptions o, Configuration conf) {
    Path out = new Path(o.output());
    FileSystem fs;
    try {
      fs = out.getFileSystem(conf);
    } catch (IOException e) {
      throw new IllegalArgumentException("cannot open the file system of --output " + o.output() + ": " + e.getMessage(), e);
    }
    createFolder(fs, out, o.output());
    byte[] record = record(o.runId());
    OutputLock held = isLocal(fs) ? lockLocal(fs, out, record) : lockShared(fs, out, record);
    try {
      reserveRunId(fs, o, record);
      return held;
    } catch (RuntimeException e) {
      held.close();
      throw e;
    }
  }

  /** The output folder, created if missing; a file there, or a folder that cannot be written, is refused. */
  private static void createFolder(FileSystem fs, Path out, String given) {
    try {
      if (fs.exists(out) && !fs.getFileStatus(out).isDirectory()) {
        throw new IllegalArgumentException("--output " + given + " is a file, not a folder");
      }
      if (!fs.mkdirs(out)) throw new IOException("mkdirs failed");
      if (isLocal(fs) && !java.nio.file.Files.isWritable(localPath(fs, out))) throw new IOException("read-only folder");
    } catch (IOException | UncheckedIOException e) {
      throw new IllegalArgumentException("--output " + given + " is not a writable folder: " + e.getMessage(), e);
    }
  }

  /**
   * POSIX record locks belong to the process, and closing any descriptor of the file drops them all:
   * so a run in this JVM never opens the file while another run here holds it (it is refused from
   * this table), and the holder reads the old record through its own channel.
   */
  private static final Map<java.nio.file.Path, byte[]> HELD_HERE = new HashMap<>();

  private static OutputLock lockLocal(FileSystem fs, Path out, byte[] record) {
    java.nio.file.Path file = localPath(fs, new Path(out, FILE)).toAbsolutePath().normalize();
    synchronized (HELD_HERE) {
      if (HELD_HERE.containsKey(file)) throw busy(out, HELD_HERE.get(file), null);
      FileChannel ch = null;
      try {
        ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE);
        FileLock lock = ch.tryLock();
        if (lock == null) {
          byte[] holder = readAll(ch);
          ch.close();
          throw busy(out, holder, null);
        }
        byte[] previous = readAll(ch);
        if (previous.length > 0) LOG.info("taking over {}: its last holder is gone ({})", file, describe(previous));
        ch.truncate(0);
        ch.write(ByteBuffer.wrap(record), 0);
        ch.force(true);
        HELD_HERE.put(file, record);
        return new OutputLock(ch, lock, file, null, null);
      } catch (IOException e) {
        closeQuietly(ch);
        throw new IllegalArgumentException("--output " + out + " is not a writable folder: cannot lock " + file + ": " + e, e);
      }
    }
  }

  private static byte[] readAll(FileChannel ch) throws IOException {
    ByteBuffer b = ByteBuffer.allocate((int) Math.min(ch.size(), 64 * 1024));
    ch.read(b, 0);
    return java.util.Arrays.copyOf(b.array(), b.position());
  }

  private static OutputLock lockShared(FileSystem fs, Path out, byte[] record) {
    Path file = new Path(out, FILE);
    try {
      createNew(fs, file, record);
      return new OutputLock(null, null, null, fs, file);
    } catch (FileAlreadyExistsException | org.apache.hadoop.fs.FileAlreadyExistsException e) {
      byte[] holder;
      try (var in = fs.open(file)) {
        holder = in.readAllBytes();
      } catch (IOException r) {
        holder = new byte[0];
      }
      throw busy(out, holder, "if that run is no longer running, delete " + file);
    } catch (IOException e) {
      throw new IllegalArgumentException("--output " + out + " is not a writable folder: cannot create " + file + ": " + e, e);
    }
  }

  /**
   * {@code runs/<run_id>.started}, created only if absent, so two runs given one --run-id cannot both
   * pass even where the lock is weaker than the OS's; also refuses ids whose outputs already exist.
   */
  private static void reserveRunId(FileSystem fs, RunOptions o, byte[] record) {
    Path manifest = RunManifest.path(o.output(), o.runId());
    Path outputs = new Path(new Path(o.output(), "outputs"), "run_id=" + o.runId());
    Path started = startedPath(o.output(), o.runId());
    try {
      for (Path used : new Path[] {manifest, outputs}) {
        if (fs.exists(used)) throw usedRunId(o, used);
      }
      fs.mkdirs(started.getParent());
      createNew(fs, started, startedRecord(record, o));
    } catch (FileAlreadyExistsException | org.apache.hadoop.fs.FileAlreadyExistsException e) {
      throw usedRunId(o, started);
    } catch (IOException e) {
      throw new IllegalArgumentException("--output " + o.output() + " is not a writable folder: cannot create "
          + started + ": " + e.getMessage(), e);
    }
  }

  /** The lock's record and the options the run's answers depend on, which a later --resume compares ({@link ResumeCheck}). */
  private static byte[] startedRecord(byte[] record, RunOptions o) throws IOException {
    com.fasterxml.jackson.databind.node.ObjectNode r = (com.fasterxml.jackson.databind.node.ObjectNode) JSON.readTree(record);
    r.set("answers", JSON.valueToTree(ResumeCheck.answerOptions(o)));
    return JSON.writeValueAsBytes(r);
  }

  /** Where a run's start is recorded: run id, host, pid, start time, answer options (the manifest comes at the end). */
  static Path startedPath(String output, String runId) {
    return new Path(new Path(output, "runs"), runId + ".started");
  }

  private static IllegalArgumentException usedRunId(RunOptions o, Path evidence) {
    return new IllegalArgumentException("run id '" + o.runId() + "' was already used under " + o.output()
        + " (" + evidence + " exists); choose another --run-id");
  }

  private static IllegalArgumentException busy(Path out, byte[] holder, String hint) {
    return new IllegalArgumentException("--output " + out + " is in use by " + describe(holder)
        + "; one run at a time per output" + (hint == null ? "" : " (" + hint + ")"));
  }

  /** "run X (started T, host H, pid P)" from a lock record; a record being written reads as unknown. */
  static String describe(byte[] record) {
    try {
      JsonNode r = JSON.readTree(record);
      return "run " + r.path("run_id").asText("?") + " (started " + r.path("start").asText("?") + ", host "
          + r.path("host").asText("?") + ", pid " + r.path("pid").asText("?") + ")";
    } catch (IOException | RuntimeException e) {
      return "another run (its record is not readable yet)";
    }
  }

  private static byte[] record(String runId) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("run_id", runId);
    m.put("host", hostName());
    m.put("pid", ProcessHandle.current().pid());
    m.put("start", Instant.now().toString());
    try {
      return JSON.writeValueAsBytes(m);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static String hostName() {
    try {
      return InetAddress.getLocalHost().getHostName();
    } catch (IOException e) {
      return "unknown";
    }
  }

  /** Creates a file only if absent: java.nio's CREATE_NEW on a local disk (Hadoop's local create checks, then creates). */
  private static void createNew(FileSystem fs, Path p, byte[] content) throws IOException {
    if (isLocal(fs)) {
      Files.write(localPath(fs, p), content, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
      return;
    }
    try (OutputStream os = fs.create(p, false)) {
      os.write(content);
    }
  }

  /** A file: URI is a POSIX disk (local or NFS) with OS locks; every other scheme gets the lock file. */
  private static boolean isLocal(FileSystem fs) {
    return "file".equals(fs.getUri().getScheme());
  }

  private static java.nio.file.Path localPath(FileSystem fs, Path p) {
    return java.nio.file.Path.of(fs.makeQualified(p).toUri());
  }

  private static void closeQuietly(FileChannel ch) {
    try {
      if (ch != null) ch.close();
    } catch (IOException e) {
      // nothing held yet
    }
  }

  /** Releases the lock: the OS lock (the file stays, see above), or the shared lock file. */
  @Override
  public void close() {
    try {
      if (channel != null) {
        synchronized (HELD_HERE) {
          lock.release();
          channel.close();
          HELD_HERE.remove(localFile);
        }
      } else {
        fs.delete(file, false);
      }
    } catch (IOException e) {
      LOG.warn("could not release the output lock: {}", e.toString());
    }
  }
}
