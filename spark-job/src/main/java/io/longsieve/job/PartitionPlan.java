package io.longsieve.job;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;

/**
 * Which partition each document goes to, chosen on the driver so that partitions finish together.
 *
 * <p>Longest-processing-time-first (LPT): documents sorted by estimated cost, most expensive first,
 * each put into the partition with the least cost so far. Partitions are then renumbered by total
 * cost, heaviest first, because Spark launches a stage's tasks in partition-index order: with more
 * partitions than executors the scheduler itself continues LPT at the task level (a free executor
 * takes the heaviest partition left). Ties break on the document id, so the same input always
 * gives the same plan (a retried or resumed run places documents identically).
 *
 * <p>Shared prompt prefixes (prefix reuse, docs/prefix-reuse.md): documents with the same
 * {@link DocCost#group} are one unit, packed into one partition so that its engine computes the
 * prefix once; the unit costs the sum of its documents less the prefix's prefill for every document
 * but the first ({@link DocCost#sharedSaving}). A unit larger than a partition's fair share
 * (total / partitions, or the largest single document when that is more) is cut into pieces of about
 * that share, each computing the prefix once, so one document asked a thousand questions does not
 * become one straggling partition.
 */
public final class PartitionPlan implements Serializable {

  /**
   * One document's estimated cost; id is the input's doc_id.
   *
   * @param group        key of the prompt prefix it shares with other documents, or null
   * @param sharedSaving what its cost drops by when another document of its group computed the prefix
   */
  public record DocCost(String docId, double cost, String group, double sharedSaving) implements Serializable {
    /** A document that shares no prefix. */
    public DocCost(String docId, double cost) {
      this(docId, cost, null, 0);
    }
  }

  /** Documents placed together: one, or a shared prefix's group (or a piece of one), and their cost. */
  private record Unit(List<DocCost> docs, double cost) {}

  private final HashMap<String, Integer> partitionOf;
  private final double[] partitionCost; // (partitions) estimated cost, non-increasing
  private final double maxDocCost;

  private PartitionPlan(HashMap<String, Integer> partitionOf, double[] partitionCost, double maxDocCost) {
    this.partitionOf = partitionOf;
    this.partitionCost = partitionCost;
    this.maxDocCost = maxDocCost;
  }

  /** Packs the documents into {@code partitions} partitions (duplicate ids: the first one counts). */
  public static PartitionPlan pack(List<DocCost> docs, int partitions) {
    if (partitions <= 0) throw new IllegalArgumentException("partitions must be > 0");
    List<Unit> units = units(docs, partitions);
    Unit[] sorted = units.toArray(new Unit[0]);
    Arrays.sort(sorted, Comparator.comparingDouble(Unit::cost).reversed().thenComparing(u -> u.docs().get(0).docId()));
    // min-heap of (load, bin); ties go to the lower bin so the result does not depend on heap internals
    PriorityQueue<double[]> bins = new PriorityQueue<>(
        Comparator.<double[]>comparingDouble(b -> b[0]).thenComparingDouble(b -> b[1]));
    for (int i = 0; i < partitions; i++) bins.add(new double[] {0, i});
    int[] binOf = new int[sorted.length];
    double[] load = new double[partitions];
    double maxDoc = 0;
    for (int d = 0; d < sorted.length; d++) {
      double c = Math.max(0, sorted[d].cost());
      double[] bin = bins.poll();
      bin[0] += c;
      bins.add(bin);
      binOf[d] = (int) bin[1];
      load[(int) bin[1]] += c;
      maxDoc = Math.max(maxDoc, c);
    }
    // renumber: heaviest bin becomes partition 0
    Integer[] order = new Integer[partitions];
    for (int i = 0; i < partitions; i++) order[i] = i;
    Arrays.sort(order, Comparator.<Integer>comparingDouble(i -> -load[i]).thenComparingInt(i -> i));
    int[] rank = new int[partitions];
    double[] cost = new double[partitions];
    for (int r = 0; r < partitions; r++) {
      rank[order[r]] = r;
      cost[r] = load[order[r]];
    }
    HashMap<String, Integer> partitionOf = new HashMap<>(docs.size() * 2);
    for (int d = 0; d < sorted.length; d++) {
      for (DocCost doc : sorted[d].docs()) partitionOf.put(doc.docId(), rank[binOf[d]]);
    }
    return new PartitionPlan(partitionOf, cost, maxDoc);
  }

  /**
   * The units to pack: each document alone, except a group's documents, which go together (in doc_id
   * order) at the group's cost, cut into as few near-equal pieces as keep each within a partition's fair
   * share. Duplicate ids: the first one counts.
   */
  private static List<Unit> units(List<DocCost> docs, int partitions) {
    HashMap<String, Boolean> seen = new HashMap<>();
    java.util.TreeMap<String, List<DocCost>> groups = new java.util.TreeMap<>();
    List<Unit> units = new ArrayList<>();
    double total = 0, largest = 0;
    for (DocCost d : docs) {
      if (seen.putIfAbsent(d.docId(), Boolean.TRUE) != null) continue;
      largest = Math.max(largest, d.cost());
      if (d.group() == null) {
        units.add(new Unit(List.of(d), d.cost()));
        total += Math.max(0, d.cost());
      } else {
        groups.computeIfAbsent(d.group(), g -> new ArrayList<>()).add(d);
      }
    }
    for (List<DocCost> g : groups.values()) {
      g.sort(Comparator.comparing(DocCost::docId));
      total += groupCost(g);
    }
    double fairShare = Math.max(total / partitions, largest);
    for (List<DocCost> g : groups.values()) {
      int pieces = (int) Math.min(g.size(), Math.max(1, Math.ceil(groupCost(g) / fairShare - 1e-9)));
      for (int p = 0; p < pieces; p++) {
        List<DocCost> piece = List.copyOf(g.subList(g.size() * p / pieces, g.size() * (p + 1) / pieces));
        units.add(new Unit(piece, groupCost(piece)));
      }
    }
    return units;
  }

  /** Documents that share a prefix, run together: the first pays the prefix, the others their own part. */
  private static double groupCost(List<DocCost> g) {
    double cost = 0;
    for (int i = 0; i < g.size(); i++) {
      DocCost d = g.get(i);
      cost += i == 0 ? Math.max(0, d.cost()) : Math.max(0, d.cost() - d.sharedSaving());
    }
    return cost;
  }

  /**
   * Partitions to ask for: {@code waves} per task slot, so that a lost executor costs a fraction of its
   * share and stragglers are small, but never more than there are documents, and at least one.
   */
  public static int suggestPartitions(int slots, int waves, long documents) {
    long n = (long) Math.max(1, slots) * Math.max(1, waves);
    return (int) Math.max(1, Math.min(n, Math.max(1, documents)));
  }

  public int numPartitions() {
    return partitionCost.length;
  }

  /** The partition of a planned document, or -1 for an id the plan has not seen. */
  public int partitionOf(String docId) {
    Integer p = docId == null ? null : partitionOf.get(docId);
    return p == null ? -1 : p;
  }

  public int documents() {
    return partitionOf.size();
  }

  /** Estimated cost of each partition, heaviest first (a copy). */
  public double[] partitionCosts() {
    return partitionCost.clone();
  }

  public double totalCost() {
    double t = 0;
    for (double c : partitionCost) t += c;
    return t;
  }

  /** The most expensive unit placed whole: a document, or the documents of a shared prefix that go together. */
  public double maxDocCost() {
    return maxDocCost;
  }

  /** No schedule on {@code executors} can finish before this: max(total / executors, largest unit). */
  public double lowerBound(int executors) {
    return Math.max(totalCost() / executors, maxDocCost);
  }

  /**
   * Finish time when {@code executors} take partitions in index order, each the next one as soon as
   * it is free (what Spark's scheduler does with one task slot per executor).
   */
  public double simulateMakespan(int executors) {
    PriorityQueue<Double> free = new PriorityQueue<>();
    for (int i = 0; i < executors; i++) free.add(0.0);
    double end = 0;
    for (double c : partitionCost) {
      double t = free.poll() + c;
      end = Math.max(end, t);
      free.add(t);
    }
    return end;
  }

  /** The documents of each partition, for tests and logs (ids in no particular order). */
  public List<List<String>> members() {
    List<List<String>> out = new ArrayList<>();
    for (int i = 0; i < partitionCost.length; i++) out.add(new ArrayList<>());
    for (Map.Entry<String, Integer> e : partitionOf.entrySet()) out.get(e.getValue()).add(e.getKey());
    return out;
  }

  @Override
  public String toString() {
    return String.format("PartitionPlan[%d documents in %d partitions, heaviest %.3g, lightest %.3g, largest document %.3g]",
        documents(), numPartitions(), partitionCost[0], partitionCost[partitionCost.length - 1], maxDocCost);
  }
}
