package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * examples/java/LongSieveExample.java, which no module builds (bin/longsieve example runs it as a
 * single-file program): it compiles against the job's public API and runs to its end, printing the
 * DataFrame API's and the SQL function's rows.
 */
class ExampleAppTest {

  private static final Path EXAMPLE = Path.of("..", "examples", "java", "LongSieveExample.java").toAbsolutePath().normalize();

  @Test
  void theExampleCompilesAndRunsOverTheSampleDocuments(@TempDir Path classes) throws Exception {
    JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
    int rc = javac.run(null, null, null, "-d", classes.toString(), "-cp", System.getProperty("java.class.path"),
        EXAMPLE.toString());
    assertEquals(0, rc, "the example compiles against the public API");
    PrintStream saved = System.out;
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    try (URLClassLoader loader = new URLClassLoader(new URL[] {classes.toUri().toURL()}, getClass().getClassLoader())) {
      System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8)); // Dataset.show prints to System.out
      loader.loadClass("LongSieveExample").getMethod("main", String[].class).invoke(null, (Object) new String[] {
          Path.of("..", "examples", "docs.jsonl").toString(), JobTestSupport.MODEL.toString()});
    } finally {
      System.setOut(saved);
    }
    String out = captured.toString(StandardCharsets.UTF_8);
    for (String expected : List.of("|doc_id", "|story", "|0.8", "|42")) assertTrue(out.contains(expected), expected + " in\n" + out);
    assertTrue(out.split("\\|ok ").length > 3, "documents answered through the API and SQL:\n" + out);
  }
}
