package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.longsieve.cli.OneLineLogFormat;
import java.io.InputStream;
import java.util.Properties;
import java.util.logging.LogRecord;
import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.core.LogEvent;
import org.apache.logging.log4j.core.impl.Log4jLogEvent;
import org.apache.logging.log4j.core.layout.PatternLayout;
import org.apache.logging.log4j.message.SimpleMessage;
import org.junit.jupiter.api.Test;

/**
 * {@code generate} and the other engine commands log as {@code run} does: the engine's JUL records,
 * formatted by {@link OneLineLogFormat}, are the very line the job's log4j2 pattern
 * (longsieve-log4j2.properties) prints for the same event, one line each.
 */
class EngineLogFormatTest {

  @Test
  void engineLinesEqualTheJobsPatternForEveryLevel() throws Exception {
    Properties conf = new Properties();
    try (InputStream in = EngineLogFormatTest.class.getResourceAsStream("/longsieve-log4j2.properties")) {
      conf.load(in);
    }
    PatternLayout job = PatternLayout.newBuilder().withPattern(conf.getProperty("appender.console.layout.pattern"))
        .build();
    long t = 1_796_000_000_123L;
    Object[][] levels = {{java.util.logging.Level.INFO, Level.INFO}, {java.util.logging.Level.WARNING, Level.WARN},
        {java.util.logging.Level.SEVERE, Level.ERROR}};
    for (Object[] l : levels) {
      String message = "device auto: using cpu (no NVIDIA driver (libcuda.so.1 not found))";
      LogEvent event = Log4jLogEvent.newBuilder().setLoggerName("io.longsieve.bootstrap.Backends")
          .setLevel((Level) l[1]).setMessage(new SimpleMessage(message)).setTimeMillis(t).build();
      LogRecord record = new LogRecord((java.util.logging.Level) l[0], message);
      record.setLoggerName("io.longsieve.bootstrap.Backends");
      record.setInstant(java.time.Instant.ofEpochMilli(t));

      String line = new OneLineLogFormat().format(record);
      assertEquals(job.toSerializable(event), line);
      assertEquals(1, line.lines().count(), line);
    }
  }
}
