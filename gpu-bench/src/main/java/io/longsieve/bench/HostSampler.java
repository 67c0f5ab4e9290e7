package io.longsieve.bench;

import java.io.PrintStream;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * A poor man's host profiler for the benchmarks (the bundled JRE has no Flight Recorder): a daemon
 * thread samples one thread's stack every {@code periodMicros} and counts, per method, the samples
 * where it is on top (self) and anywhere on the stack (total). Good enough to see where a decode
 * step's host time goes when the host, not the GPU, bounds it.
 */
final class HostSampler implements AutoCloseable {
  private final Thread target;
  private final Thread sampler;
  private final Map<String, int[]> counts = new HashMap<>(); // method -> {self, total}
  private volatile boolean running = true;
  private int samples;

  HostSampler(Thread target, long periodMicros) {
    this.target = target;
    this.sampler = new Thread(() -> {
      while (running) {
        StackTraceElement[] st = target.getStackTrace();
        if (st.length > 0) record(st);
        try {
          Thread.sleep(periodMicros / 1000, (int) (periodMicros % 1000) * 1000);
        } catch (InterruptedException e) {
          return;
        }
      }
    }, "host-sampler");
    sampler.setDaemon(true);
    sampler.start();
  }

  private synchronized void record(StackTraceElement[] st) {
    samples++;
    Set<String> seen = new LinkedHashSet<>();
    for (int i = 0; i < st.length; i++) {
      String m = st[i].getClassName().replaceFirst("^.*\\.", "") + "." + st[i].getMethodName();
      int[] c = counts.computeIfAbsent(m, x -> new int[2]);
      if (i == 0) c[0]++;
      if (seen.add(m)) c[1]++;
    }
  }

  /** Stops sampling and prints the methods with the most self and total samples. */
  synchronized void print(PrintStream out, String title, int top) {
    out.printf(Locale.ROOT, "host profile: %s (%d samples)%n", title, samples);
    for (int which = 0; which < 2; which++) {
      final int w = which;
      out.println(which == 0 ? "  self:" : "  total:");
      counts.entrySet().stream().sorted((a, b) -> b.getValue()[w] - a.getValue()[w]).limit(top)
          .forEach(e -> out.printf(Locale.ROOT, "    %5.1f%%  %s%n", 100.0 * e.getValue()[w] / Math.max(1, samples),
              e.getKey()));
    }
  }

  @Override
  public void close() {
    running = false;
    sampler.interrupt();
    try {
      sampler.join(1000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
