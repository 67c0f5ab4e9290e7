package io.longsieve.job;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.UUID;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Writes the job's own small files (the run manifest, the report and its quantiles) whole or not at
 * all: to a hidden temporary name beside the target, then renamed over it. A disk that fills, or a
 * process killed, half-way leaves the previous file (or none), never a torn one that a reader would
 * take for the run's record; the temporary file is removed on failure.
 *
 * <p>On a local disk the rename is {@code rename(2)} (atomic, replaces the target); elsewhere it is
 * the file system's rename (atomic on HDFS; S3A copies, but the temporary object is complete before
 * the copy starts), with the old target deleted first where the store refuses to rename over it.
 */
public final class AtomicFiles {
  private AtomicFiles() {}

  /** Writes {@code content} to {@code target}, replacing a file already there. */
  public static void write(Path target, byte[] content, Configuration conf) throws IOException {
    FileSystem fs = target.getFileSystem(conf);
    Path tmp = new Path(target.getParent(), "." + target.getName() + "." + UUID.randomUUID() + ".tmp");
    boolean local = "file".equals(fs.getUri().getScheme());
    try {
      if (local) {
        // java.nio: no .crc side file, and a real fsync before the rename
        java.nio.file.Path t = java.nio.file.Path.of(fs.makeQualified(tmp).toUri());
        Files.createDirectories(t.getParent());
        try (var ch = java.nio.channels.FileChannel.open(t, java.nio.file.StandardOpenOption.CREATE_NEW,
            java.nio.file.StandardOpenOption.WRITE)) {
          java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(content);
          while (b.hasRemaining()) ch.write(b);
          ch.force(true);
        }
        Files.move(t, java.nio.file.Path.of(fs.makeQualified(target).toUri()), StandardCopyOption.ATOMIC_MOVE,
            StandardCopyOption.REPLACE_EXISTING);
        return;
      }
      try (OutputStream os = fs.create(tmp, false)) {
        os.write(content);
      }
      if (!fs.rename(tmp, target)) {
        fs.delete(target, false);
        if (!fs.rename(tmp, target)) throw new IOException("cannot rename " + tmp + " to " + target);
      }
    } catch (IOException | RuntimeException e) {
      try {
        fs.delete(tmp, false);
      } catch (IOException ignored) {
        // the failure below says what matters; a leftover hidden .tmp file is ignored by every reader
      }
      throw e;
    }
  }
}
