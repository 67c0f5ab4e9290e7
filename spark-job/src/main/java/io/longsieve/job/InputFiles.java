package io.longsieve.job;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.parquet.hadoop.util.HadoopInputFile;
import org.apache.parquet.schema.Type;

/**
 * The input's files, listed on the driver before Spark reads anything, so that nothing is skipped
 * without a word and a folder Spark could not read as one table is refused with one line:
 * <ul>
 *   <li>A folder is read recursively: every file in every subfolder is data, except names that
 *       start with {@code _} or {@code .} (_SUCCESS, .crc side files, _temporary/, .hidden), which
 *       are skipped and named in the log and in the run manifest ({@code skipped_input_files}).</li>
 *   <li>All data files must be one format: Parquet mixed with JSONL is refused, naming files of both.</li>
 *   <li>Parquet files must agree on the type of every column they share; a column only some files
 *       have is read as null in the others (Spark's mergeSchema).</li>
 * </ul>
 * Spark is then given the data files themselves, never the folder, so it reads exactly this list.
 */
final class InputFiles {

  private static final Logger LOG = LogManager.getLogger(InputFiles.class);
  /** Files named in a refusal; the rest are counted. */
  private static final int NAMED = 3;

  /**
   * The files to read.
   *
   * @param format   the one format of every data file
   * @param data     data files, full paths, sorted
   * @param skipped  skipped files, relative to the input folder, sorted
   * @param largest  size in bytes of the largest data file
   * @param columns  every Parquet file's columns together, null for JSONL (known only by reading it)
   * @param snapshot each data file's length and modification time when listed, checked again by every read
   */
  record Listing(InputReader.Format format, List<String> data, List<String> skipped, long largest,
      java.util.Set<String> columns, InputSnapshot snapshot) {}

  private InputFiles() {}

  /** Lists and checks the input; throws IllegalArgumentException (one line) for what cannot be read as one table. */
  static Listing list(Configuration conf, String input) {
    return list(conf, input, null);
  }

  /**
   * The same for a run writing to {@code output} (null: none): an output folder inside the input folder
   * is left out of the listing, said in the log and named in {@code skipped} (the job's own Parquet
   * files would otherwise be read as input by the next run, and refused as a mix with the JSONL);
   * the input folder itself as the output is refused.
   */
  static Listing list(Configuration conf, String input, String output) {
    try {
      Path p = new Path(input);
      FileSystem fs = p.getFileSystem(conf);
      if (!fs.exists(p)) throw new IllegalArgumentException("input " + input + " does not exist");
      List<FileStatus> data = new ArrayList<>();
      List<String> skipped = new ArrayList<>();
      FileStatus top = fs.getFileStatus(p);
      if (top.isDirectory()) {
        Path root = fs.makeQualified(p);
        String inside = output == null ? null : outputInside(fs, root, output, input);
        if (inside != null) {
          LOG.warn("input: leaving out {}/ in {}: it is this run's --output", inside, input);
          skipped.add(inside + "/ (the run's --output)");
        }
        RemoteIterator<LocatedFileStatus> files = fs.listFiles(root, true);
        while (files.hasNext()) {
          LocatedFileStatus f = files.next();
          String rel = relative(root, f.getPath());
          if (inside != null && (rel.equals(inside) || rel.startsWith(inside + "/"))) continue;
          if (hidden(rel)) skipped.add(rel);
          else data.add(f);
        }
      } else {
        data.add(top); // a file named on the command line is read whatever its name
      }
      data.sort((a, b) -> a.getPath().compareTo(b.getPath()));
      skipped.sort(null);
      for (String s : skipped) LOG.warn("input: skipping {} in {} (names starting with _ or . are not data)", s, input);
      if (data.isEmpty()) {
        throw new IllegalArgumentException("input folder " + input + " holds no data files"
            + (skipped.isEmpty() ? "" : " (skipped: " + names(skipped) + ")"));
      }
      Map<InputReader.Format, List<String>> byFormat = new LinkedHashMap<>();
      long largest = 0;
      for (FileStatus f : data) {
        byFormat.computeIfAbsent(format(fs, f.getPath()), k -> new ArrayList<>()).add(f.getPath().toString());
        largest = Math.max(largest, f.getLen());
      }
      if (byFormat.size() > 1) {
        throw new IllegalArgumentException("input " + input + " mixes Parquet files (" + names(byFormat.get(InputReader.Format.PARQUET))
            + ") and JSONL files (" + names(byFormat.get(InputReader.Format.JSONL)) + "); give one format per --input");
      }
      InputReader.Format format = byFormat.keySet().iterator().next();
      List<String> paths = byFormat.get(format);
      java.util.Set<String> columns = format == InputReader.Format.PARQUET ? checkParquetSchemas(conf, paths, input) : null;
      return new Listing(format, List.copyOf(paths), List.copyOf(skipped), largest, columns,
          InputSnapshot.of(fs, top.isDirectory() ? p : null, data));
    } catch (IOException e) {
      throw new IllegalArgumentException("cannot read input " + input + ": " + e.getMessage(), e);
    }
  }

  /**
   * Where {@code output} lies inside the input folder {@code root}, relative to it; null when outside.
   * On a local disk both are compared with links resolved (the output may not exist yet: its nearest
   * existing folder is resolved).
   */
  private static String outputInside(FileSystem fs, Path root, String output, String input) throws IOException {
    Path out = new Path(output);
    if (!out.isAbsolute() && out.toUri().getScheme() == null) out = fs.makeQualified(out);
    if (out.toUri().getScheme() != null && !out.toUri().getScheme().equals(fs.getUri().getScheme())) return null;
    String r = root.toUri().getPath();
    String o = fs.makeQualified(out).toUri().getPath();
    if ("file".equals(fs.getUri().getScheme())) {
      r = real(java.nio.file.Path.of(r)).toString();
      o = real(java.nio.file.Path.of(o)).toString();
    }
    if (o.equals(r)) {
      throw new IllegalArgumentException("--output " + output + " is the --input folder " + input
          + " itself; choose an output folder outside the input");
    }
    return o.startsWith(r + "/") ? o.substring(r.length() + 1) : null;
  }

  /** The path with links resolved, through its nearest existing ancestor. */
  private static java.nio.file.Path real(java.nio.file.Path p) throws IOException {
    java.nio.file.Path abs = p.toAbsolutePath().normalize();
    java.nio.file.Path existing = abs;
    while (existing != null && !java.nio.file.Files.exists(existing)) existing = existing.getParent();
    if (existing == null) return abs;
    return existing.toRealPath().resolve(existing.relativize(abs));
  }

  /** Spark's rule, applied to every folder below the input and the file itself. */
  private static boolean hidden(String relative) {
    for (String part : relative.split("/")) if (part.startsWith("_") || part.startsWith(".")) return true;
    return false;
  }

  private static String relative(Path root, Path file) {
    String r = root.toUri().getPath();
    String f = file.toUri().getPath();
    return f.startsWith(r + "/") ? f.substring(r.length() + 1) : f;
  }

  /**
   * JSONL or Parquet: by extension (.parquet; .jsonl, .json, .ndjson, also compressed), else by the
   * file's magic bytes ("PAR1").
   */
  static InputReader.Format format(FileSystem fs, Path file) throws IOException {
    String name = file.getName().toLowerCase(Locale.ROOT);
    if (name.endsWith(".parquet")) return InputReader.Format.PARQUET;
    if (name.matches(".*\\.(jsonl|json|ndjson)(\\.(gz|bz2|zst|lz4|snappy|deflate))?")) return InputReader.Format.JSONL;
    try (InputStream in = fs.open(file)) {
      byte[] magic = in.readNBytes(4);
      return Arrays.equals(magic, "PAR1".getBytes(StandardCharsets.US_ASCII)) ? InputReader.Format.PARQUET
          : InputReader.Format.JSONL;
    }
  }

  /**
   * Reads every footer (a few KB each) and refuses two files that give one column different types:
   * Spark would fail on the executors with a long trace, or silently read one file's type.
   */
  private static java.util.Set<String> checkParquetSchemas(Configuration conf, List<String> files, String input) throws IOException {
    Map<String, Type> firstType = new LinkedHashMap<>();
    Map<String, String> firstFile = new LinkedHashMap<>();
    for (String f : files) {
      List<Type> fields;
      try (ParquetFileReader r = ParquetFileReader.open(HadoopInputFile.fromPath(new Path(f), conf))) {
        fields = r.getFooter().getFileMetaData().getSchema().getFields();
      } catch (IOException | RuntimeException e) {
        throw new IllegalArgumentException("input " + input + ": " + new Path(f).getName() + " is not a readable Parquet file: "
            + e.getMessage(), e);
      }
      for (Type t : fields) {
        Type seen = firstType.putIfAbsent(t.getName(), t);
        if (seen == null) {
          firstFile.put(t.getName(), f);
        } else if (!sameType(seen, t)) {
          throw new IllegalArgumentException("input " + input + ": Parquet files disagree on column '" + t.getName() + "': "
              + new Path(firstFile.get(t.getName())).getName() + " has '" + seen + "', " + new Path(f).getName()
              + " has '" + t + "'");
        }
      }
    }
    return java.util.Set.copyOf(firstType.keySet());
  }

  /** Equal but for optional/required: Spark reads a required column as a nullable one. */
  private static boolean sameType(Type a, Type b) {
    return stripRepetition(a).equals(stripRepetition(b));
  }

  private static String stripRepetition(Type t) {
    return t.toString().replaceFirst("^\\s*(optional|required)\\s+", "");
  }

  /** "a.jsonl, b.jsonl, c.jsonl and 4 more": enough to find them, one line however many. */
  private static String names(List<String> paths) {
    List<String> shown = new ArrayList<>();
    for (int i = 0; i < Math.min(NAMED, paths.size()); i++) shown.add(paths.get(i).replaceFirst(".*/", ""));
    return String.join(", ", shown) + (paths.size() > NAMED ? " and " + (paths.size() - NAMED) + " more" : "");
  }
}
