package io.longsieve.job;

import java.nio.file.Path;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;

/**
 * Base of the job tests that share one local Spark session per class ({@link JobTestSupport#session})
 * and write into a fresh temporary folder per test.
 */
abstract class SparkSessionTest {

  static SparkSession spark;

  @TempDir
  Path dir;

  @BeforeAll
  static void startSpark() {
    spark = JobTestSupport.session();
  }

  @AfterAll
  static void stopSpark() {
    spark.stop();
  }
}
