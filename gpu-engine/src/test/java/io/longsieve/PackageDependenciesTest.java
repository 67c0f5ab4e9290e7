package io.longsieve;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The engine's rooms and the one way their dependencies run, read from the import lines of the main
 * sources (a small scan: no bytecode library):
 * <pre>
 *   model ← policy ← engine.spi ← engine
 *   structured (JSON-schema grammar and token masks: no other room) ← engine, cli
 *                              ← cpu.kernels ← cpu.policy ← cpu
 *                              ← cuda.driver ← cuda.kernels ← cuda.kv ← cuda.policy ← cuda
 *   engine, cpu, cuda ← bootstrap ← eval, cli
 * </pre>
 * A room may import itself and the rooms listed for it, nothing else, and no two packages may
 * import each other, directly or around a loop. Fully qualified names in code are not imports and are
 * not seen; write imports.
 */
class PackageDependenciesTest {

  private static final Path MAIN = Path.of("src/main/java");
  private static final String ROOT = "io.longsieve.";

  /** Each room (a package and its sub-packages not listed themselves) and the rooms it may import. */
  private static final Map<String, Set<String>> ALLOWED = new LinkedHashMap<>();

  static {
    allow("model");
    allow("structured");
    allow("policy", "model");
    allow("engine.spi", "policy", "model");
    allow("engine", "engine.spi", "policy", "model", "structured");
    allow("cpu.kernels", "engine.spi", "model");
    allow("cpu.policy", "cpu.kernels", "policy", "model");
    allow("cpu", "cpu.policy", "cpu.kernels", "engine.spi", "policy", "model");
    allow("cuda.driver", "model");
    allow("cuda.kernels", "cuda.driver", "policy", "model");
    allow("cuda.kv", "cuda.kernels", "cuda.driver", "model");
    allow("cuda.policy", "cuda.kv", "cuda.kernels", "cuda.driver", "policy", "model");
    allow("cuda", "cuda.policy", "cuda.kv", "cuda.kernels", "cuda.driver", "engine.spi", "policy", "model");
    allow("bootstrap", "engine", "engine.spi", "cpu", "cuda", "policy", "model");
    allow("eval", "bootstrap", "engine", "engine.spi", "policy", "model");
    allow("cli", "eval", "bootstrap", "engine", "engine.spi", "structured", "cpu", "cpu.policy", "cpu.kernels", "cuda", "cuda.kernels",
        "cuda.driver", "policy", "model");
  }

  private static void allow(String room, String... imports) {
    ALLOWED.put(room, Set.of(imports));
  }

  private static final Pattern PACKAGE = Pattern.compile("^package (io\\.longsieve\\.[\\w.]+);", Pattern.MULTILINE);
  private static final Pattern IMPORT =
      Pattern.compile("^import (?:static )?(io\\.longsieve\\.[\\w.]+?)\\.[A-Z]\\w*(?:\\.[\\w*]+)*;", Pattern.MULTILINE);

  @Test
  void everyRoomImportsOnlyWhatItMay() {
    List<String> violations = new ArrayList<>();
    for (Map.Entry<String, Set<String>> e : imports().entrySet()) {
      String from = room(e.getKey());
      assertTrue(ALLOWED.containsKey(from), "package " + e.getKey() + " is in no room; add it to ALLOWED");
      for (String to : e.getValue()) {
        String target = room(to);
        if (!target.equals(from) && !ALLOWED.get(from).contains(target)) violations.add(e.getKey() + " -> " + to);
      }
    }
    assertEquals(List.of(), violations, "imports against the one-way rooms (see this test's Javadoc)");
  }

  @Test
  void noPackageCycles() {
    Map<String, Set<String>> graph = imports();
    List<String> cycles = new ArrayList<>();
    for (String start : graph.keySet()) {
      List<String> path = new ArrayList<>();
      if (reaches(graph, start, start, path, new TreeSet<>())) cycles.add(start + " -> " + String.join(" -> ", path));
    }
    assertEquals(List.of(), cycles, "packages that import themselves around a loop");
  }

  /** Benchmarks live in gpu-bench (io.longsieve.bench): the engine's sources and fatbin carry none of them. */
  @Test
  void theProductCarriesNoBenchmark() throws IOException {
    assertEquals(Map.of(), imports().entrySet().stream()
        .filter(e -> e.getValue().stream().anyMatch(p -> p.startsWith(ROOT + "bench")))
        .collect(java.util.stream.Collectors.toMap(Map.Entry::getKey, Map.Entry::getValue)), "imports of io.longsieve.bench");
    try (Stream<Path> files = Files.walk(MAIN)) {
      assertEquals(List.of(), files.map(p -> p.getFileName().toString()).filter(n -> n.endsWith("Bench.java")).toList());
    }
    try (Stream<Path> files = Files.walk(Path.of("src/main/cuda"))) {
      assertEquals(List.of(), files.map(p -> p.getFileName().toString()).filter(n -> n.equals("list_floor.cu")).toList(),
          "bench-only kernels belong in gpu-bench/src/main/cuda");
    }
  }

  /** True when {@code target} is reachable from {@code at} in one or more steps; {@code path} holds the steps. */
  private static boolean reaches(Map<String, Set<String>> g, String at, String target, List<String> path, Set<String> seen) {
    for (String next : g.getOrDefault(at, Set.of())) {
      path.add(next);
      if (next.equals(target)) return true;
      if (seen.add(next) && reaches(g, next, target, path, seen)) return true;
      path.remove(path.size() - 1);
    }
    return false;
  }

  /** The room of a package: the longest ALLOWED key it is or is under; itself when none is. */
  private static String room(String pkg) {
    String rel = pkg.substring(ROOT.length());
    String best = null;
    for (String r : ALLOWED.keySet()) {
      boolean inside = rel.equals(r) || rel.startsWith(r + ".");
      if (inside && (best == null || r.length() > best.length())) best = r;
    }
    return best == null ? rel : best;
  }

  /** Package → the other io.longsieve packages its files import. */
  private static Map<String, Set<String>> imports() {
    Map<String, Set<String>> out = new TreeMap<>();
    try (Stream<Path> files = Files.walk(MAIN)) {
      for (Path f : (Iterable<Path>) files.filter(p -> p.toString().endsWith(".java"))::iterator) {
        String text = Files.readString(f);
        Matcher pm = PACKAGE.matcher(text);
        if (!pm.find()) continue;
        String pkg = pm.group(1);
        Set<String> deps = out.computeIfAbsent(pkg, k -> new TreeSet<>());
        Matcher im = IMPORT.matcher(text);
        while (im.find()) {
          String to = packageOf(im.group(1));
          if (!to.equals(pkg)) deps.add(to);
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out;
  }

  /** {@code io.longsieve.policy.PolicyCatalog} (a nested import) → {@code io.longsieve.policy}. */
  private static String packageOf(String name) {
    String[] parts = name.split("\\.");
    StringBuilder b = new StringBuilder();
    for (String p : parts) {
      if (Character.isUpperCase(p.charAt(0))) break;
      if (b.length() > 0) b.append('.');
      b.append(p);
    }
    return b.toString();
  }
}
