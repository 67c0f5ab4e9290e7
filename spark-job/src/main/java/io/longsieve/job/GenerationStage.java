package io.longsieve.job;

import io.longsieve.job.PartitionPlan.DocCost;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.rdd.PartitionPruningRDD;
import org.apache.spark.resource.ResourceProfile;
import org.apache.spark.resource.ResourceProfileBuilder;
import org.apache.spark.resource.TaskResourceRequests;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import scala.Tuple2;
import scala.runtime.AbstractFunction1;

/**
 * Plans and builds the generation stage: documents placed by estimated cost, the heaviest partition
 * first, long documents first inside each partition, one {@link DocumentProcessor} per partition.
 *
 * <p>Driver side: the (doc_id, size) pairs of the documents to run are collected (tens of bytes per
 * document), priced with {@link CostModel}, packed with {@link PartitionPlan}, and the plan is
 * broadcast to the {@link CostAwarePartitioner}. The plan is a pure function of the input, so a
 * retried task (lost executor, speculative copy) gets exactly the same documents as the attempt it
 * replaces; with Spark's output commit protocol (one committed attempt per partition) no doc_id can
 * be written twice.
 *
 * <p>Durable progress: the partitions are written in consecutive slices, each its own Spark job
 * and commit (stats, then outputs), so a run killed half-way keeps every finished slice and
 * {@code --resume} skips those documents. The shuffle is shared: later slices reuse its map output.
 *
 * <p>GPUs: with {@code spark.longsieve.inferenceGpuAmount > 0} this stage alone carries a stage-level
 * TaskResourceProfile (1 CPU + that share of a GPU per task), so the read and write stages keep every
 * core while only generation tasks are limited to the executor's GPU. Spark supports a task-only
 * profile with dynamic allocation off on standalone, YARN and Kubernetes, not in local[N] mode, where
 * it is skipped with a log line.
 */
final class GenerationStage {
  private GenerationStage() {}

  private static final Logger LOG = LogManager.getLogger(GenerationStage.class);

  /** Chat-template and instruction tokens around the document text, for the estimate. */
  static final int TEMPLATE_TOKENS = 48;

  /**
   * The stage's rows (JobSchemas.RESULT rows, one RDD partition per plan partition), the plan behind
   * them, how many commit slices the run writes them in, and how many input rows it covers (repeated
   * doc_ids included, which the plan counts once).
   */
  record Stage(SparkSession spark, JavaRDD<Row> results, PartitionPlan plan, int slices, long rows) {

    /** Partitions [from, to) of slice {@code s}: consecutive, so the heaviest go first. */
    int[] sliceRange(int s) {
      int n = plan.numPartitions();
      return new int[] {(int) ((long) n * s / slices), (int) ((long) n * (s + 1) / slices)};
    }

    /** The rows of slice {@code s} as a DataFrame; its job computes only that slice's partitions. */
    Dataset<Row> slice(int s) {
      int[] r = sliceRange(s);
      JavaRDD<Row> part = JavaRDD.fromRDD(PartitionPruningRDD.create(results.rdd(), new InRange(r[0], r[1])),
          results.classTag());
      return spark.createDataFrame(part, JobSchemas.RESULT);
    }
  }

  /** Partition filter of a slice; serializable because it travels inside the pruned RDD. */
  static final class InRange extends AbstractFunction1<Object, Object> implements Serializable {
    private final int from;
    private final int to;

    InRange(int from, int to) {
      this.from = from;
      this.to = to;
    }

    @Override
    public Object apply(Object partition) {
      int p = (Integer) partition;
      return p >= from && p < to;
    }
  }

  /**
   * Commit slices: {@code requested} if set, else one per wave of task slots (partitions / slots),
   * so that a run killed half-way keeps the slices it finished; never more than the partitions.
   */
  static int slices(int requested, int partitions, int slots) {
    int s = requested > 0 ? requested : partitions / Math.max(1, slots);
    return Math.max(1, Math.min(s, partitions));
  }

  /**
   * Sort key inside a partition: larger documents first, then the rows of one shared prompt prefix
   * together (prefix reuse: the engine keeps the prefix while they run), then by id, so the order is
   * reproducible.
   */
  record DocKey(String docId, long size, String group) implements Serializable {
    DocKey(String docId, long size) {
      this(docId, size, null);
    }

    static final Comparator<DocKey> LONGEST_FIRST = (Comparator<DocKey> & Serializable) (a, b) -> {
      int c = Long.compare(b.size, a.size);
      if (c == 0) c = compare(a.group, b.group);
      return c != 0 ? c : compare(a.docId, b.docId);
    };

    private static int compare(String a, String b) {
      if (a == null) return b == null ? 0 : -1;
      return b == null ? 1 : a.compareTo(b);
    }
  }

  /** A document's estimated cost; rows that arrive with a status never reach the engine and cost 1. */
  static double estimatedCost(CostModel model, long size, int maxNewTokens, double charsPerToken, boolean hasStatus) {
    if (hasStatus) return 1;
    return model.cost(CostModel.estimateTokens(size, charsPerToken) + TEMPLATE_TOKENS, maxNewTokens);
  }

  /**
   * What the driver plans a row by: its cost's inputs and, with prefix reuse, its shared head
   * ({@link DocumentProcessor#sharedHead}), computed where the rows are.
   */
  record PlanRow(String docId, long size, boolean hasStatus, Integer maxNewTokens, SharedPrefixes.Head head)
      implements Serializable {}

  static Stage build(SparkSession spark, Dataset<Row> todo, RunOptions o, JobMetrics metrics) {
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    CostModel model = CostModel.defaults(o.policy());
    double cpt = o.production().charsPerToken();
    DocumentProcessor processor = new DocumentProcessor(o, metrics, model);
    List<DocCost> costs = new ArrayList<>();
    for (PlanRow r : planRows(todo, processor, o.production().prefixReuse())) {
      int maxNew = r.maxNewTokens() == null ? o.maxNewTokens() : r.maxNewTokens(); // a row's own max_new_tokens wins
      double cost = estimatedCost(model, r.size(), maxNew, cpt, r.hasStatus());
      SharedPrefixes.Head h = r.head();
      costs.add(h == null ? new DocCost(r.docId(), cost)
          : new DocCost(r.docId(), cost, h.key(), model.prefillCost(CostModel.estimateTokens(h.chars(), cpt) + TEMPLATE_TOKENS)));
    }
    int partitions = o.partitions() > 0 ? capped(o.partitions(), costs.size())
        : PartitionPlan.suggestPartitions(jsc.defaultParallelism(), 2, costs.size());
    PartitionPlan plan = PartitionPlan.pack(costs, partitions);
    LOG.info("{}; {} task slots, estimated finish {}x the lower bound", plan, jsc.defaultParallelism(),
        String.format("%.3f", plan.simulateMakespan(jsc.defaultParallelism()) / Math.max(1e-9, plan.lowerBound(jsc.defaultParallelism()))));

    CostAwarePartitioner partitioner = CostAwarePartitioner.of(jsc, plan);
    JavaRDD<Row> ordered = todo.javaRDD()
        .mapToPair(r -> new Tuple2<>(new DocKey(r.getAs("doc_id"), r.<Long>getAs("size"), groupOf(processor, r)), r))
        .repartitionAndSortWithinPartitions(partitioner, DocKey.LONGEST_FIRST)
        .values();
    // the index is the plan partition's (the slices prune this RDD), so partition_id is unique in the run
    JavaRDD<Row> results = ordered.mapPartitionsWithIndex((i, rows) -> processor.call(rows, i), true);
    ResourceProfile profile = profile(o, spark.sparkContext().master());
    if (profile != null && !spark.sparkContext().getConf().contains("spark.executor.resource." + GpuBinding.GPU + ".amount")) {
      // Spark's own refusal names neither our setting nor the fix
      throw new IllegalArgumentException("spark.longsieve.inferenceGpuAmount=" + o.production().inferenceGpuAmount()
          + " asks each generation task for a GPU share, but the executors ask for no GPU: set "
          + "spark.executor.resource.gpu.amount=1 and spark.executor.resource.gpu.discoveryScript (conf/spark-defaults.conf "
          + "has them commented out), or remove spark.longsieve.inferenceGpuAmount to run on the CPU");
    }
    if (profile != null) results = results.withResources(profile);
    int slices = slices(o.production().slices(), plan.numPartitions(), jsc.defaultParallelism());
    return new Stage(spark, results, plan, slices, costs.size());
  }

  /** The rows' plan inputs; their shared heads only with prefix reuse on (reading every text once, on the executors). */
  private static List<PlanRow> planRows(Dataset<Row> todo, DocumentProcessor processor, boolean prefixReuse) {
    List<PlanRow> out = new ArrayList<>();
    if (!prefixReuse) {
      for (Row r : todo.select("doc_id", "size", "status", "max_new_tokens").collectAsList()) {
        out.add(new PlanRow(r.getString(0), r.getLong(1), !r.isNullAt(2), r.isNullAt(3) ? null : r.getInt(3), null));
      }
      return out;
    }
    return todo.javaRDD().map(r -> new PlanRow(r.getAs("doc_id"), r.<Long>getAs("size"), r.getAs("status") != null,
        r.getAs("max_new_tokens"), processor.sharedHead(r))).collect();
  }

  private static String groupOf(DocumentProcessor processor, Row r) {
    SharedPrefixes.Head h = processor.sharedHead(r);
    return h == null ? null : h.key();
  }

  /**
   * Partitions asked for, but never more than the documents: an empty partition is a task and a Parquet
   * file per table for nothing (10,000 partitions on 3 documents wrote empty files for minutes).
   */
  static int capped(int requested, long documents) {
    int cap = (int) Math.max(1, Math.min(Integer.MAX_VALUE, documents));
    if (requested <= cap) return requested;
    LOG.info("spark.longsieve.partitions={} capped at {}, the number of documents", requested, cap);
    return cap;
  }

  /** The generation stage's task-only profile, or null when not asked for or not supported here. */
  static ResourceProfile profile(RunOptions o, String master) {
    double gpu = o.production().inferenceGpuAmount();
    if (gpu <= 0) return null;
    if (master.startsWith("local[") || master.equals("local")) {
      LOG.warn("spark.longsieve.inferenceGpuAmount={} ignored: Spark supports stage-level task profiles on "
          + "standalone, YARN and Kubernetes, not in {} mode", gpu, master);
      return null;
    }
    TaskResourceRequests task = new TaskResourceRequests().cpus(1).resource(GpuBinding.GPU, gpu);
    return new ResourceProfileBuilder().require(task).build();
  }
}
