package io.longsieve.job;

import java.io.IOException;
import java.util.function.Predicate;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;

/**
 * {@code fulltest:///path}, the local disk, where creating a file that {@link #full} matches fails as a
 * full disk does ("No space left on device"): a disk that fills at a chosen point of a run, in one JVM
 * (local mode), and frees again when {@link #full} is reset.
 */
public class FullDiskFileSystem extends SharedStoreFileSystem {

  /** Files whose creation fails; none by default. */
  static volatile Predicate<Path> full = p -> false;

  /** The Hadoop settings that make {@code fulltest:} this class (set on Spark's and the run's configuration). */
  static final String IMPL_KEY = "fs.fulltest.impl";

  @Override
  protected String scheme() {
    return "fulltest";
  }

  @Override
  public FSDataOutputStream create(Path f, FsPermission permission, boolean overwrite, int bufferSize, short replication,
      long blockSize, Progressable progress) throws IOException {
    check(f);
    return super.create(f, permission, overwrite, bufferSize, replication, blockSize, progress);
  }

  @Override
  public FSDataOutputStream create(Path f, boolean overwrite, int bufferSize, short replication, long blockSize,
      Progressable progress) throws IOException {
    check(f);
    return super.create(f, overwrite, bufferSize, replication, blockSize, progress);
  }

  private static void check(Path f) throws IOException {
    if (full.test(f)) throw new IOException("No space left on device (writing " + f.toUri().getPath() + ")");
  }
}
