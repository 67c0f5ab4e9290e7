package io.longsieve.report;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Optional;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.junit.jupiter.api.Test;

/** Which eval run a job run's report shows. */
class EvalResultsTest {

  private static FileStatus partition(String evalRunId, long modified) {
    return new FileStatus(0, true, 1, 0, modified, new Path("/out/eval/results/run_id=" + evalRunId));
  }

  private final FileStatus[] partitions = {partition("eval", 300), partition("nightly", 200),
      partition("nightly-2", 100)};

  @Test
  void theEvalRunOfTheSameId() {
    assertEquals(Optional.of("nightly"), EvalResults.choose(partitions, "nightly"));
  }

  @Test
  void aPerPolicyJobRunOfAnEvalFindsItsEval() {
    assertEquals(Optional.of("nightly"), EvalResults.choose(partitions, "nightly-p3"));
    assertEquals(Optional.of("nightly-2"), EvalResults.choose(partitions, "nightly-2-p0"));
  }

  @Test
  void otherwiseTheMostRecentlyWrittenEval() {
    assertEquals(Optional.of("eval"), EvalResults.choose(partitions, "20261129-0850"));
    assertEquals(Optional.empty(), EvalResults.choose(new FileStatus[0], "x"));
  }
}
