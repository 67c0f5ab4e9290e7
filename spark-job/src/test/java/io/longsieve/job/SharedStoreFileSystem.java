package io.longsieve.job;

import java.io.IOException;
import java.net.URI;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.security.AccessControlException;
import org.apache.hadoop.util.Progressable;

/**
 * A Hadoop file system under its own scheme, {@code sharedtest:///path}, backed by the local disk:
 * for the job it is a store like HDFS or S3A (not {@code file:}), so the code paths for stores without
 * OS locks run in a test. {@link ReadOnly} refuses every write, as a read-only bucket or an HDFS folder
 * without write permission does.
 */
public class SharedStoreFileSystem extends RawLocalFileSystem {

  /** Settings that make {@code sharedtest:} (and {@code readonlytest:}) resolve to these classes. */
  public static Configuration configuration() {
    Configuration conf = new Configuration();
    conf.set("fs.sharedtest.impl", SharedStoreFileSystem.class.getName());
    conf.setBoolean("fs.sharedtest.impl.disable.cache", true);
    conf.set("fs.readonlytest.impl", ReadOnly.class.getName());
    conf.setBoolean("fs.readonlytest.impl.disable.cache", true);
    return conf;
  }

  protected String scheme() {
    return "sharedtest";
  }

  @Override
  public URI getUri() {
    return URI.create(scheme() + ":///");
  }

  @Override
  public String getScheme() {
    return scheme();
  }

  /** Every write is refused with the permission error HDFS gives. */
  public static class ReadOnly extends SharedStoreFileSystem {
    @Override
    protected String scheme() {
      return "readonlytest";
    }

    @Override
    public FSDataOutputStream create(Path f, FsPermission permission, boolean overwrite, int bufferSize,
        short replication, long blockSize, Progressable progress) throws IOException {
      throw denied(f);
    }

    @Override
    public FSDataOutputStream create(Path f, boolean overwrite, int bufferSize, short replication, long blockSize,
        Progressable progress) throws IOException {
      throw denied(f);
    }

    private static AccessControlException denied(Path f) {
      return new AccessControlException("Permission denied: access=WRITE, inode=\"" + f.toUri().getPath() + "\"");
    }

    @Override
    public boolean mkdirs(Path f, FsPermission permission) throws IOException {
      if (exists(f)) return true;
      throw denied(f);
    }
  }
}
