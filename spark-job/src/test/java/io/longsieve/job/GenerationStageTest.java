package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.Map;
import org.apache.spark.resource.ResourceProfile;
import org.apache.spark.resource.TaskResourceProfile;
import org.junit.jupiter.api.Test;

/** The generation stage's plan pieces that do not need a running job. */
class GenerationStageTest {

  static RunOptions options(Map<String, String> extra) {
    return JobTestSupport.options(Path.of("in.jsonl"), Path.of("out"), "t", extra);
  }

  @Test
  void onlyTheGenerationStageClaimsAGpuShareThroughATaskProfile() {
    RunOptions o = options(Map.of("spark.longsieve.inferenceGpuAmount", "0.25"));
    ResourceProfile p = GenerationStage.profile(o, "spark://master:7077");
    assertTrue(p instanceof TaskResourceProfile, "task-only profile: runs on the default executors");
    assertEquals(0.25, p.taskResources().get("gpu").get().amount(), 0);
    assertEquals(1.0, p.taskResources().get("cpus").get().amount(), 0);
    assertNull(GenerationStage.profile(o, "local[4]"), "Spark has no task profiles in local mode");
    assertNull(GenerationStage.profile(options(Map.of()), "yarn"), "off unless asked for");
  }

  @Test
  void slicesFollowWavesOfTaskSlots() {
    assertEquals(2, GenerationStage.slices(0, 128, 64));
    assertEquals(1, GenerationStage.slices(0, 8, 64));
    assertEquals(8, GenerationStage.slices(20, 8, 2), "never more slices than partitions");
    GenerationStage.Stage stage = new GenerationStage.Stage(null, null,
        PartitionPlan.pack(java.util.List.of(new PartitionPlan.DocCost("a", 1)), 10), 3, 1);
    assertArrayEquals(new int[] {0, 3}, stage.sliceRange(0));
    assertArrayEquals(new int[] {3, 6}, stage.sliceRange(1));
    assertArrayEquals(new int[] {6, 10}, stage.sliceRange(2));
  }

  @Test
  void badRowsCostAlmostNothingAndLongDocumentsCostMore() {
    CostModel m = CostModel.defaults("dense");
    assertEquals(1, GenerationStage.estimatedCost(m, 1_000_000, 64, 4, true), 0);
    assertTrue(GenerationStage.estimatedCost(m, 400_000, 64, 4, false) > 10 * GenerationStage.estimatedCost(m, 40_000, 64, 4, false));
  }
}
