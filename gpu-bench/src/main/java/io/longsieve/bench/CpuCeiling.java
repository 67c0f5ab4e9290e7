package io.longsieve.bench;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.Locale;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * One core's fp32 fused multiply-add rate, the ceiling the CPU benchmark (tools/bench_cpu_peer.py)
 * reports its FLOP/s against: sixteen independent chains of vector FMAs (more than the FMA units'
 * latency times their number, so the chains never wait on each other), in registers, on one
 * thread; the best of several runs. Prints one JSON line: GFLOP/s per thread CPU second (what the
 * core does when it runs; the figure to quote on a shared machine) and per wall second.
 *
 * <p>Run: {@code java --add-modules jdk.incubator.vector -cp <gpu-bench classes> io.longsieve.bench.CpuCeiling}
 */
public final class CpuCeiling {
  private CpuCeiling() {}

  private static final VectorSpecies<Float> S = FloatVector.SPECIES_PREFERRED;

  public static void main(String[] args) {
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    long iterations = 20_000_000;
    double bestCpu = 0, bestWall = 0;
    float sink = 0;
    for (int run = 0; run < 8; run++) { // the first runs compile the loop
      long w0 = System.nanoTime(), c0 = threads.getCurrentThreadCpuTime();
      sink += chains(iterations);
      long w1 = System.nanoTime(), c1 = threads.getCurrentThreadCpuTime();
      double flops = iterations * 16.0 * S.length() * 2;
      bestCpu = Math.max(bestCpu, flops / (c1 - c0));
      bestWall = Math.max(bestWall, flops / (w1 - w0));
    }
    System.out.printf(Locale.ROOT, "{\"fma_gflops_per_cpu_second\": %.1f, \"fma_gflops_per_wall_second\": %.1f, "
        + "\"vector_bits\": %d, \"processors\": %d, \"sink\": %.3f}%n", bestCpu, bestWall, S.vectorBitSize(),
        Runtime.getRuntime().availableProcessors(), sink);
  }

  /** Sixteen independent FMA chains, {@code iterations} steps each; returns their sum so nothing is dead. */
  private static float chains(long iterations) {
    FloatVector m = FloatVector.broadcast(S, 0.999999f), c = FloatVector.broadcast(S, 1e-7f);
    FloatVector a0 = FloatVector.broadcast(S, 1f), a1 = a0.add(0.01f), a2 = a0.add(0.02f), a3 = a0.add(0.03f);
    FloatVector a4 = a0.add(0.04f), a5 = a0.add(0.05f), a6 = a0.add(0.06f), a7 = a0.add(0.07f);
    FloatVector a8 = a0.add(0.08f), a9 = a0.add(0.09f), a10 = a0.add(0.10f), a11 = a0.add(0.11f);
    FloatVector a12 = a0.add(0.12f), a13 = a0.add(0.13f), a14 = a0.add(0.14f), a15 = a0.add(0.15f);
    for (long i = 0; i < iterations; i++) {
      a0 = a0.fma(m, c);
      a1 = a1.fma(m, c);
      a2 = a2.fma(m, c);
      a3 = a3.fma(m, c);
      a4 = a4.fma(m, c);
      a5 = a5.fma(m, c);
      a6 = a6.fma(m, c);
      a7 = a7.fma(m, c);
      a8 = a8.fma(m, c);
      a9 = a9.fma(m, c);
      a10 = a10.fma(m, c);
      a11 = a11.fma(m, c);
      a12 = a12.fma(m, c);
      a13 = a13.fma(m, c);
      a14 = a14.fma(m, c);
      a15 = a15.fma(m, c);
    }
    FloatVector s = a0.add(a1).add(a2).add(a3).add(a4).add(a5).add(a6).add(a7);
    s = s.add(a8).add(a9).add(a10).add(a11).add(a12).add(a13).add(a14).add(a15);
    return s.reduceLanes(VectorOperators.ADD);
  }
}
