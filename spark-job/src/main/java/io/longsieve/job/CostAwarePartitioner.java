package io.longsieve.job;

import org.apache.spark.Partitioner;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;

/**
 * Spark's side of a {@link PartitionPlan}: keys are doc_ids, the partition is the one the plan chose.
 *
 * <p>Keys are doc_id strings or {@link GenerationStage.DocKey}s (doc_id plus size and shared-prefix key, for sorting).
 *
 * <p>Failure semantics: pure and deterministic. A key the plan does not know (a row whose doc_id was
 * null or unreadable, which the job turns into an error row) goes to a partition chosen by a stable
 * hash of the key, never an exception, so bad rows still reach the output. The plan travels as a
 * broadcast, once per executor, not inside every task's closure (a million ids are tens of MB).
 */
public final class CostAwarePartitioner extends Partitioner {

  private final Broadcast<PartitionPlan> plan;
  private final int partitions;

  public CostAwarePartitioner(Broadcast<PartitionPlan> plan) {
    this.plan = plan;
    this.partitions = plan.value().numPartitions();
  }

  /** Broadcasts the plan and wraps it. */
  public static CostAwarePartitioner of(JavaSparkContext sc, PartitionPlan plan) {
    return new CostAwarePartitioner(sc.broadcast(plan));
  }

  @Override
  public int numPartitions() {
    return partitions;
  }

  @Override
  public int getPartition(Object key) {
    String id = key instanceof GenerationStage.DocKey k ? k.docId() : key == null ? null : key.toString();
    int p = plan.value().partitionOf(id);
    return p >= 0 ? p : fallback(id, partitions);
  }

  static int fallback(String id, int partitions) {
    return id == null ? 0 : Math.floorMod(id.hashCode(), partitions);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof CostAwarePartitioner other && other.plan.id() == plan.id();
  }

  @Override
  public int hashCode() {
    return Long.hashCode(plan.id());
  }
}
