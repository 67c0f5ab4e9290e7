package io.longsieve.job;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.Serializable;
import java.time.Instant;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.paths.SparkPath;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.expressions.GenericRowWithSchema;
import org.apache.spark.sql.types.StructType;

/**
 * The input's data files as the driver planned them: each file's length and modification time,
 * taken when the input is listed ({@link InputFiles#list}), before any row is read.
 *
 * <p>Why: a run reads its input several times (the cost plan, the budget, the generation, the audit),
 * and Spark reads a file as it is at that moment: a file cut, grown, rewritten or deleted between two
 * reads would give the generation other rows than the plan counted, and the difference would vanish
 * without a word. So every task that reads a file first compares it with this snapshot
 * ({@link Check}) and fails the run naming the file, and the driver compares every file again at the
 * end of the run and whenever a Spark job fails ({@link #firstChange}).
 *
 * <p>Paths are keyed by their decoded path component: Spark's {@code _metadata.file_path} is a URL
 * string (a space is {@code %20}) while Hadoop's {@code Path.toString} is not.
 */
final class InputSnapshot implements Serializable {

  /** One file as planned. */
  record Stamp(long length, long modified) implements Serializable {}

  private final LinkedHashMap<String, Stamp> files; // key: decoded path, sorted as listed
  private final LinkedHashMap<String, String> shown; // key -> the path as the user sees it
  private final LinkedHashMap<String, String> names; // key -> the name in rows' source: relative to the input folder
  private final String root; // the input folder (qualified), listed again to compare; null for a single file

  private InputSnapshot(LinkedHashMap<String, Stamp> files, LinkedHashMap<String, String> shown,
      LinkedHashMap<String, String> names, String root) {
    this.files = files;
    this.shown = shown;
    this.names = names;
    this.root = root;
  }

  /**
   * @param root the input folder, whose files are named by their path below it (a/part.jsonl); null for
   *     a single input file, named by its file name
   */
  static InputSnapshot of(FileSystem fs, Path root, List<FileStatus> statuses) {
    LinkedHashMap<String, Stamp> files = new LinkedHashMap<>();
    LinkedHashMap<String, String> shown = new LinkedHashMap<>();
    LinkedHashMap<String, String> names = new LinkedHashMap<>();
    String prefix = root == null ? null : key(fs.makeQualified(root)) + "/";
    for (FileStatus s : statuses) {
      Path p = fs.makeQualified(s.getPath());
      String key = key(p);
      files.put(key, new Stamp(s.getLen(), s.getModificationTime()));
      shown.put(key, p.toString());
      names.put(key, prefix != null && key.startsWith(prefix) ? key.substring(prefix.length()) : p.getName());
    }
    return new InputSnapshot(files, shown, names, root == null ? null : fs.makeQualified(root).toString());
  }

  /**
   * The file's name in its rows' {@code source} and in the ids of its bad lines: its path below the
   * input folder, so that part.jsonl in a/ and in b/ stay apart; null for a file not listed.
   */
  String name(String key) {
    return names.get(key);
  }

  int size() {
    return files.size();
  }

  static String key(Path p) {
    return p.toUri().getPath();
  }

  /** The key of a path as Spark's {@code _metadata.file_path} gives it (a URL string). */
  static String keyOfSparkPath(String urlString) {
    return key(SparkPath.fromUrlString(urlString).toPath());
  }

  /**
   * What changed about the file at {@code key} since the plan, in words; null when it is as planned
   * or not part of this snapshot.
   */
  String change(String key, Configuration conf) {
    Stamp planned = files.get(key);
    if (planned == null) return null;
    String name = shown.get(key);
    Path p = new Path(name);
    FileStatus now;
    try {
      now = p.getFileSystem(conf).getFileStatus(p);
    } catch (FileNotFoundException e) {
      return "input file " + name + " was deleted during the run (planned: " + describe(planned) + ")";
    } catch (IOException e) {
      return "input file " + name + " cannot be read any more (" + e.getMessage() + "; planned: " + describe(planned) + ")";
    }
    if (now.getLen() == planned.length() && now.getModificationTime() == planned.modified()) return null;
    return "input file " + name + " changed during the run (planned: " + describe(planned) + "; now: "
        + describe(new Stamp(now.getLen(), now.getModificationTime())) + ")";
  }

  /**
   * The first file, in listing order, that is not as planned; null when none changed. A folder is listed
   * again in one recursive listing (batched on HDFS and S3A, as the plan's was) rather than asked file by
   * file; files added since are not compared, since the run never reads them.
   */
  RunFault firstChange(Configuration conf) {
    Map<String, Stamp> now = root == null ? null : listed(conf);
    for (String key : files.keySet()) {
      String c;
      if (now == null) {
        c = change(key, conf);
      } else {
        Stamp n = now.get(key);
        Stamp planned = files.get(key);
        c = n == null ? change(key, conf) // gone from the listing: say how, by asking the file itself
            : n.equals(planned) ? null
            : "input file " + shown.get(key) + " changed during the run (planned: " + describe(planned) + "; now: "
                + describe(n) + ")";
      }
      if (c != null) return RunFault.inputChanged(c);
    }
    return null;
  }

  /** Every file under the input folder now, by key; null when the folder cannot be listed (then file by file). */
  private Map<String, Stamp> listed(Configuration conf) {
    Path folder = new Path(root);
    Map<String, Stamp> now = new HashMap<>();
    try {
      RemoteIterator<LocatedFileStatus> it = folder.getFileSystem(conf).listFiles(folder, true);
      while (it.hasNext()) {
        LocatedFileStatus f = it.next();
        now.put(key(f.getPath()), new Stamp(f.getLen(), f.getModificationTime()));
      }
      return now;
    } catch (IOException e) {
      return null;
    }
  }

  /** Fails with {@link RunFault.Kind#INPUT_CHANGED} when some file is not as planned. */
  void requireUnchanged(Configuration conf) {
    RunFault f = firstChange(conf);
    if (f != null) throw f;
  }

  private static String describe(Stamp s) {
    return s.length() + " bytes, modified " + Instant.ofEpochMilli(s.modified());
  }

  /**
   * Passes rows through, checking each input file the first time this task sees a row of it (column
   * {@code file_path}, a Spark URL string) and naming the file in column {@code file_name} by its path
   * below the input folder ({@link #name}). A file that is not as planned fails the task with a
   * {@link RunFault} naming it, which Spark hands to the driver.
   */
  static final class Check implements MapPartitionsFunction<Row, Row> {
    private final Broadcast<InputSnapshot> snapshot;
    private final StructType schema;
    private final int pathColumn;
    private final int nameColumn;

    Check(Broadcast<InputSnapshot> snapshot, StructType schema) {
      this.snapshot = snapshot;
      this.schema = schema;
      this.pathColumn = schema.fieldIndex("file_path");
      this.nameColumn = schema.fieldIndex("file_name");
    }

    @Override
    public Iterator<Row> call(Iterator<Row> rows) {
      Set<String> checked = new HashSet<>();
      Configuration conf = executorConf();
      return new Iterator<>() {
        private String lastPath; // rows of one file come together: parse its URL once
        private String lastKey;

        @Override
        public boolean hasNext() {
          return rows.hasNext();
        }

        @Override
        public Row next() {
          Row r = rows.next();
          String path = r.getString(pathColumn);
          if (!path.equals(lastPath)) {
            lastPath = path;
            lastKey = keyOfSparkPath(path);
          }
          String key = lastKey;
          if (checked.add(key)) {
            String c = snapshot.value().change(key, conf);
            if (c != null) throw RunFault.inputChanged(c);
          }
          String name = snapshot.value().name(key);
          if (name == null || name.equals(r.getString(nameColumn))) return r;
          Object[] values = new Object[r.length()];
          for (int i = 0; i < values.length; i++) values[i] = r.get(i);
          values[nameColumn] = name;
          return new GenericRowWithSchema(values, schema);
        }
      };
    }
  }

  /** The executor's Hadoop settings (spark.hadoop.* included), as Spark builds them; a plain one outside Spark. */
  static Configuration executorConf() {
    SparkEnv env = SparkEnv.get();
    return env == null ? new Configuration() : org.apache.spark.deploy.SparkHadoopUtil.get().newConfiguration(env.conf());
  }
}
