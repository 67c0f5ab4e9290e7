package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.job.PartitionPlan.DocCost;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** Longest-first packing against the lower bound max(total / executors, largest document). */
class PartitionPlanTest {

  /** 10,000 documents, log-normal lengths (median 8K tokens) kept inside [1K, 128K], 256 output tokens. */
  static List<DocCost> logNormalCorpus(CostModel model, long seed) {
    Random rnd = new Random(seed);
    List<DocCost> docs = new ArrayList<>();
    while (docs.size() < 10_000) {
      double tokens = Math.exp(Math.log(8192) + 1.2 * rnd.nextGaussian());
      if (tokens < 1024 || tokens > 131_072) continue; // truncated log-normal
      docs.add(new DocCost("doc-" + docs.size(), model.cost((int) tokens, 256)));
    }
    return docs;
  }

  @Test
  void tenThousandLogNormalDocumentsOn64ExecutorsFinishWithin5PercentOfTheLowerBound() {
    for (String policy : new String[] {"dense", "tsa + selkv:ratio=0.25 + tokenselect:k=2048"}) {
      List<DocCost> docs = logNormalCorpus(CostModel.defaults(policy), 42);
      // one partition per executor: the packing alone must balance
      PartitionPlan one = PartitionPlan.pack(docs, 64);
      double ratio1 = one.simulateMakespan(64) / one.lowerBound(64);
      // four partitions per executor, scheduled in index order as Spark does
      PartitionPlan four = PartitionPlan.pack(docs, 256);
      double ratio4 = four.simulateMakespan(64) / four.lowerBound(64);
      assertTrue(ratio1 <= 1.05, policy + ": 64 partitions give " + ratio1 + " × the lower bound");
      assertTrue(ratio4 <= 1.05, policy + ": 256 partitions give " + ratio4 + " × the lower bound");
      assertEquals(10_000, one.documents());
    }
  }

  @Test
  void randomOrderWouldStraggleWhereLongestFirstDoesNot() {
    // the same corpus dealt round-robin in input order, the way a plain repartition(64) would
    List<DocCost> docs = logNormalCorpus(CostModel.defaults("dense"), 7);
    double[] load = new double[64];
    for (int i = 0; i < docs.size(); i++) load[i % 64] += docs.get(i).cost();
    double worst = 0, total = 0;
    for (double l : load) {
      worst = Math.max(worst, l);
      total += l;
    }
    PartitionPlan plan = PartitionPlan.pack(docs, 64);
    assertTrue(worst / (total / 64) > plan.simulateMakespan(64) / plan.lowerBound(64),
        "round-robin " + worst / (total / 64) + " vs LPT " + plan.simulateMakespan(64) / plan.lowerBound(64));
  }

  @Test
  void aDocumentLargerThanAnExecutorsShareGetsAPartitionToItself() {
    List<DocCost> docs = new ArrayList<>();
    docs.add(new DocCost("huge", 1000));
    for (int i = 0; i < 30; i++) docs.add(new DocCost("small-" + i, 10));
    PartitionPlan plan = PartitionPlan.pack(docs, 4);
    assertEquals(0, plan.partitionOf("huge"), "heaviest partition comes first");
    assertEquals(List.of("huge"), plan.members().get(0));
    assertEquals(1000, plan.lowerBound(4));
    assertEquals(1000, plan.simulateMakespan(4));
  }

  @Test
  void sameInputGivesTheSamePlanAndEveryDocumentHasExactlyOnePartition() {
    List<DocCost> docs = logNormalCorpus(CostModel.defaults("dense"), 3).subList(0, 500);
    PartitionPlan a = PartitionPlan.pack(docs, 16);
    List<DocCost> shuffled = new ArrayList<>(docs);
    java.util.Collections.shuffle(shuffled, new Random(1));
    PartitionPlan b = PartitionPlan.pack(shuffled, 16);
    Set<String> seen = new HashSet<>();
    for (List<String> part : a.members()) for (String id : part) assertTrue(seen.add(id), id);
    assertEquals(500, seen.size());
    for (DocCost d : docs) assertEquals(a.partitionOf(d.docId()), b.partitionOf(d.docId()), d.docId());
    assertEquals(-1, a.partitionOf("not-planned"));
  }

  @Test
  void partitionCountFollowsSlotsAndWavesButNeverExceedsTheDocuments() {
    assertEquals(128, PartitionPlan.suggestPartitions(64, 2, 10_000));
    assertEquals(3, PartitionPlan.suggestPartitions(64, 2, 3));
    assertEquals(1, PartitionPlan.suggestPartitions(0, 0, 0));
  }
  @Test
  void aSharedPrefixsDocumentsGoTogetherAndCountThePrefixOnce() {
    List<DocCost> docs = new ArrayList<>();
    for (int q = 0; q < 8; q++) docs.add(new DocCost("contract-q" + q, 100, "contract", 90)); // 90 of 100: the prefix
    for (int i = 0; i < 30; i++) docs.add(new DocCost("single-" + i, 40));
    PartitionPlan plan = PartitionPlan.pack(docs, 4);
    Set<Integer> where = new HashSet<>();
    for (int q = 0; q < 8; q++) where.add(plan.partitionOf("contract-q" + q));
    assertEquals(1, where.size(), "one partition computes the prefix once");
    assertEquals(100 + 7 * 10 + 30 * 40, plan.totalCost(), 1e-9);
    assertEquals(170, plan.maxDocCost(), 1e-9, "the group is placed whole");
  }

  @Test
  void aGroupLargerThanAPartitionsShareIsCutIntoPiecesThatEachComputeThePrefix() {
    List<DocCost> docs = new ArrayList<>();
    for (int q = 0; q < 100; q++) docs.add(new DocCost(String.format("report-q%03d", q), 100, "report", 50));
    PartitionPlan plan = PartitionPlan.pack(docs, 4);
    // 100 + 99 * 50 = 5050 as one unit; the fair share is 5050 / 4, so four pieces of 25, each paying the prefix once
    int[] perPartition = new int[4];
    for (int q = 0; q < 100; q++) perPartition[plan.partitionOf(String.format("report-q%03d", q))]++;
    for (int n : perPartition) assertTrue(n >= 20 && n <= 30, java.util.Arrays.toString(perPartition));
    assertTrue(plan.simulateMakespan(4) / plan.lowerBound(4) <= 1.05, plan.toString());
  }
}
