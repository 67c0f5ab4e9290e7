package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.engine.spi.EngineSpec;
import java.util.List;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;

/**
 * The executor plugin: it starts in every executor that Spark launches with
 * spark.plugins=io.longsieve.job.LongSievePlugin, and the GPU it records binds engines whose task
 * carries no GPU address (a CPU spec stays on the CPU).
 */
class LongSievePluginTest {

  @Test
  void startsInTheExecutorsOfASessionThatNamesIt() {
    SparkSession.getDefaultSession().foreach(s -> {
      s.stop();
      return null;
    });
    SparkSession spark = SparkSession.builder().master("local[2]").appName("longsieve-plugin-test")
        .config("spark.ui.enabled", "false").config(LongSievePlugin.conf().getKey(), LongSievePlugin.conf().getValue())
        .getOrCreate();
    try {
      List<Integer> seen = new JavaSparkContext(spark.sparkContext()).parallelize(List.of(1, 2, 3, 4), 2)
          .map(x -> LongSievePlugin.executorStarts()).collect();
      for (int s : seen) assertTrue(s >= 1, "tasks ran in an executor whose plugin started: " + seen);
    } finally {
      spark.stop();
    }
  }

  @Test
  void theExecutorGpuBindsSpecsThatNameNoDevice() {
    try {
      ExecutorEngine.bindExecutorGpu(2);
      EngineSpec auto = EngineSpec.of(JobTestSupport.MODEL);
      assertEquals(2, ExecutorEngine.bindToTaskGpu(auto).gpuOrdinal());
      assertEquals(auto.withDevice("cpu"), ExecutorEngine.bindToTaskGpu(auto.withDevice("cpu")));
      assertEquals(0, ExecutorEngine.bindToTaskGpu(auto.withGpuOrdinal(0)).gpuOrdinal(), "an explicit GPU wins");
    } finally {
      ExecutorEngine.bindExecutorGpu(-1);
    }
  }
}
