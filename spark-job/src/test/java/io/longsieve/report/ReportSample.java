package io.longsieve.report;

import java.nio.file.Path;
import org.apache.spark.sql.SparkSession;

/**
 * Writes the fixture run (with an eval and its HTML report) into a directory, as a sample job output for trying the
 * notebook or the report by hand: {@code java -cp <test classpath> io.longsieve.report.ReportSample DIR [DOCUMENTS]}.
 */
public final class ReportSample {

  private ReportSample() {}

  public static void main(String[] args) throws Exception {
    Path out = Path.of(args[0]).toAbsolutePath();
    long documents = args.length > 1 ? Long.parseLong(args[1]) : 2000;
    String runId = "20261129-080000-sample";
    SparkSession spark = ReportFixture.spark();
    try {
      ReportFixture.writeRun(spark, out, runId, documents, documents * 80.0);
      ReportFixture.writeEval(spark, out, runId);
      System.out.println(RunReport.write(spark, out, runId));
    } finally {
      spark.stop();
    }
  }
}
