import io.longsieve.job.LongSieve;
import io.longsieve.job.LongSieveOptions;
import io.longsieve.job.LongSieveSql;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * LongSieve inside a Spark application: the DataFrame API, then the SQL function, over the same
 * documents. Run it with {@code bin/longsieve example [DOCS.jsonl] [MODEL_DIR]} (a single-file Java
 * program on the job's class path), or copy it into an application that has the job's assembly jar.
 */
public final class LongSieveExample {
  public static void main(String[] args) {
    String docsPath = args.length > 0 ? args[0] : "examples/docs.jsonl";
    String model = args.length > 1 ? args[1] : "models/longsieve-needle-7m";
    SparkSession spark = SparkSession.builder().appName("longsieve-example").master("local[2]")
        .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate();

    // 1. The DataFrame API: the documents the application already holds, in; outputs and stats, out.
    Dataset<Row> docs = spark.read().json(docsPath).limit(6);
    LongSieveOptions options = LongSieveOptions.builder()
        .model(model)
        .device("cpu")
        .maxNewTokens(24)
        .build();
    Dataset<Row> out = LongSieve.generate(docs, options).persist(); // each action would run the model again
    out.select("doc_id", "status", "output", "input_tokens", "total_ms").show(false);

    // A row may bring its own prompt template and sampling; other columns fill its placeholders.
    Dataset<Row> own = spark.sql("SELECT 'story' AS doc_id, 'Continue the story about {topic}:' AS prompt,"
        + " 'a river' AS topic, 0.8 AS temperature, 42 AS seed");
    LongSieve.generate(own, options).select("doc_id", "status", "output", "temperature", "seed").show(false);

    // 2. SQL: the same engine settings as session options, one engine per executor.
    spark.conf().set("spark.longsieve.model", model);
    spark.conf().set("spark.longsieve.device", "cpu");
    spark.conf().set("spark.longsieve.maxNewTokens", "24");
    LongSieveSql.register(spark);
    docs.createOrReplaceTempView("docs");
    spark.sql("SELECT doc_id, r.status, r.output FROM (SELECT doc_id,"
        + " longsieve_result(concat('Summarize: ', coalesce(text, '')), map('max_new_tokens', '16')) AS r FROM docs)")
        .show(false);

    out.unpersist();
    spark.stop();
  }
}
