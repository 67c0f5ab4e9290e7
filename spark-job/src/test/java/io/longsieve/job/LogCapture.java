package io.longsieve.job;

import java.util.ArrayList;
import java.util.List;
import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.core.LogEvent;
import org.apache.logging.log4j.core.LoggerContext;
import org.apache.logging.log4j.core.appender.AbstractAppender;
import org.apache.logging.log4j.core.config.Configuration;
import org.apache.logging.log4j.core.config.LoggerConfig;
import org.apache.logging.log4j.core.config.Property;

/** Collects the messages of one logger (and its children) while open; for tests that read log output. */
final class LogCapture extends AbstractAppender implements AutoCloseable {

  private final List<String> lines = new ArrayList<>();
  private final String loggerName;
  private final LoggerConfig added;

  private LogCapture(String loggerName, Level level) {
    super("capture-" + loggerName + "-" + System.nanoTime(), null, null, true, Property.EMPTY_ARRAY);
    this.loggerName = loggerName;
    LoggerContext ctx = (LoggerContext) LogManager.getContext(false);
    Configuration config = ctx.getConfiguration();
    start();
    LoggerConfig existing = config.getLoggerConfig(loggerName);
    if (existing.getName().equals(loggerName)) {
      existing.addAppender(this, level, null);
      added = null;
    } else {
      added = new LoggerConfig(loggerName, level, true);
      added.addAppender(this, level, null);
      config.addLogger(loggerName, added);
    }
    ctx.updateLoggers();
  }

  /** Starts capturing {@code loggerName} at {@code level} and above. */
  static LogCapture of(String loggerName, Level level) {
    return new LogCapture(loggerName, level);
  }

  @Override
  public synchronized void append(LogEvent event) {
    lines.add(event.getMessage().getFormattedMessage());
  }

  synchronized List<String> lines() {
    return List.copyOf(lines);
  }

  @Override
  public void close() {
    LoggerContext ctx = (LoggerContext) LogManager.getContext(false);
    Configuration config = ctx.getConfiguration();
    if (added != null) config.removeLogger(loggerName);
    else config.getLoggerConfig(loggerName).removeAppender(getName());
    ctx.updateLoggers();
    stop();
  }
}
