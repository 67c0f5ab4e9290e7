package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.engine.Engine;
import io.longsieve.engine.EngineCounters;
import io.longsieve.engine.GenerationRequest;
import io.longsieve.engine.spi.EngineSpec;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

/**
 * One engine per executor, many tasks: four task threads submit to the executor's one engine at the
 * same time (as four tasks with spark.task.resource.gpu.amount=0.25 do) and get exactly what each
 * document gives alone. The engine batches their decode steps (continuous batching); the point is that
 * sharing changes nothing but the speed.
 */
class SharedEngineConcurrencyTest {

  @Test
  void concurrentTasksOnOneEngineGetTheSameTokensAsOneAtATime() throws Exception {
    ExecutorEngine.closeAll();
    EngineSpec spec = EngineSpec.of(JobTestSupport.MODEL).withDevice("cpu").withThreads(1);
    List<GenerationRequest> docs = new ArrayList<>();
    for (int i = 0; i < 8; i++) {
      String text = "Note " + i + ": " + String.join(" ", JobTestSupport.words(20 + 7 * i));
      docs.add(GenerationRequest.chat("d" + i, text, 24));
    }
    Engine engine = ExecutorEngine.get(spec);
    List<int[]> alone = new ArrayList<>();
    for (GenerationRequest r : docs) alone.add(engine.generate(r).tokenIds());

    EngineCounters before = engine.counters();
    assertEquals(0, before.batchedDecodeSteps(), "one at a time, nothing batches");

    ExecutorService tasks = Executors.newFixedThreadPool(4);
    CountDownLatch start = new CountDownLatch(1);
    try {
      List<Future<int[]>> together = new ArrayList<>();
      for (GenerationRequest r : docs) {
        together.add(tasks.submit((Callable<int[]>) () -> {
          start.await();
          return ExecutorEngine.get(spec).generate(r).tokenIds();
        }));
      }
      start.countDown();
      for (int i = 0; i < docs.size(); i++) assertArrayEquals(alone.get(i), together.get(i).get(), "doc " + i);
    } finally {
      tasks.shutdown();
    }
    assertEquals(1, ExecutorEngine.openings(), "all tasks shared the one engine");
    List<EngineCounters> counters = ExecutorEngine.counters();
    assertEquals(1, counters.size());
    EngineCounters after = counters.get(0);
    assertEquals(2L * docs.size(), after.requests(), "every task's request went through the one engine: " + after);
    assertTrue(after.peakSequences() > 1, "several tasks' requests ran at once: " + after);
    assertTrue(after.batchedDecodeSteps() > 0 && after.peakBatch() > 1, "decode steps batched across tasks: " + after);
    ExecutorEngine.closeAll();
  }
}
