package io.longsieve.policy;

/**
 * Counters a request's policies update as they run; turned into {@link PolicyStats} at the end.
 * Updated only from the calling thread (never inside a parallel loop), so plain fields suffice.
 *
 * <p>Definitions (the same for every policy, dense included, so runs compare directly):
 * <ul>
 *   <li>attended (query, key) pairs per layer are summed over query heads; "available" pairs are
 *       what causal dense attention over the whole sequence would attend (for decode: position + 1
 *       tokens, however much the cache was compressed); their ratio per layer is the selected
 *       fraction (prefill and decode together).</li>
 *   <li>the attended-tokens mean is over decode steps × layers × query heads of the keys one
 *       decode query attended to.</li>
 *   <li>Selection Cache lookups count every TokenSelect selection while the cache is on (the
 *       first per layer is a cold miss); hits are those that reused the previous top-k.</li>
 * </ul>
 */
public final class SelectionStats {

  private final double[] attended;   // (layer) attended (query, key) pairs, summed over heads
  private final double[] available;  // (layer) pairs dense causal attention would attend
  private final boolean[] sparse;    // (layer) prefill of this layer was sparse at least once (TSA)
  private double decodeAttended;     // keys attended summed over decode steps × layers × heads
  private long decodeQueries;        // decode steps × layers × heads
  public long cacheLookups;
  public long cacheHits;
  public long selectionNanos;
  public long kvBytesAfter = -1;     // -1: no compression ran

  public SelectionStats(int layers) {
    attended = new double[layers];
    available = new double[layers];
    sparse = new boolean[layers];
  }

  public int layers() {
    return attended.length;
  }

  /** Pairs for a block of prefill work: {@code keys} attended, {@code avail} visible. */
  public void prefill(int layer, double keys, double avail) {
    attended[layer] += keys;
    available[layer] += avail;
  }

  /** One decode step of one layer: {@code keys} summed over heads, of {@code avail} per head. */
  public void decode(int layer, double keys, double avail, int heads) {
    attended[layer] += keys;
    available[layer] += avail * heads;
    decodeAttended += keys;
    decodeQueries += heads;
  }

  public void markSparse(int layer) {
    sparse[layer] = true;
  }

  /** Causal dense pairs of n queries whose first sees before + 1 slots, times heads. */
  public static double densePairs(int n, int before, int heads) {
    return ((double) n * before + (double) n * (n + 1) / 2) * heads;
  }

  public PolicyStats snapshot() {
    float[] frac = new float[attended.length];
    for (int l = 0; l < frac.length; l++) frac[l] = available[l] > 0 ? (float) (attended[l] / available[l]) : Float.NaN;
    int nSparse = 0;
    for (boolean s : sparse) if (s) nSparse++;
    double mean = decodeQueries > 0 ? decodeAttended / decodeQueries : Double.NaN;
    double hit = cacheLookups > 0 ? (double) cacheHits / cacheLookups : Double.NaN;
    return new PolicyStats(mean, frac, hit, kvBytesAfter, nSparse, selectionNanos / 1e6);
  }
}
