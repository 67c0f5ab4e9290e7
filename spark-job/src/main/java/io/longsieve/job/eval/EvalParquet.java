package io.longsieve.job.eval;

import io.longsieve.eval.EvalRow;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/** Eval rows as Parquet under {@code <output>/eval/results}, partitioned by run_id (appending keeps earlier runs). */
public final class EvalParquet {
  private EvalParquet() {}

  public static final StructType SCHEMA = new StructType()
      .add("run_id", DataTypes.StringType, false)
      .add("task", DataTypes.StringType, false)
      .add("length", DataTypes.IntegerType, false)
      .add("policy", DataTypes.StringType, false)
      .add("accuracy", DataTypes.DoubleType, false)
      .add("attended_fraction", DataTypes.DoubleType, true)
      .add("ms_per_doc", DataTypes.DoubleType, true)
      .add("n_docs", DataTypes.IntegerType, false)
      .add("n_errors", DataTypes.IntegerType, false)
      // fidelity against dense attention (eval-engine's FidelityMeter); null where not measured
      .add("kl_mean", DataTypes.DoubleType, true)
      .add("kl_max", DataTypes.DoubleType, true)
      .add("top1_agreement", DataTypes.DoubleType, true)
      .add("attention_recall", DataTypes.DoubleType, true);

  private static Double orNull(double v) {
    return Double.isNaN(v) ? null : v;
  }

  public static void write(SparkSession spark, List<EvalRow> rows, String dir) {
    List<Row> out = new ArrayList<>();
    for (EvalRow r : rows) {
      out.add(RowFactory.create(r.runId(), r.task(), r.length(), r.policy(), r.accuracy(),
          Double.isNaN(r.attendedFraction()) ? null : r.attendedFraction(), Double.isNaN(r.msPerDoc()) ? null : r.msPerDoc(),
          r.nDocs(), r.nErrors(), orNull(r.klMean()), orNull(r.klMax()), orNull(r.top1Agreement()),
          orNull(r.attentionRecall())));
    }
    spark.createDataFrame(out, SCHEMA).coalesce(1).write().mode(SaveMode.Append).partitionBy("run_id").parquet(dir);
  }
}
