package io.longsieve.cli;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.time.Instant;
import java.time.ZoneId;
import java.time.format.DateTimeFormatter;
import java.util.logging.ConsoleHandler;
import java.util.logging.Formatter;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

/**
 * The engine's java.util.logging lines in the job's format (spark-job's longsieve-log4j2.properties:
 * {@code %d{HH:mm:ss} %p %c{1}: %m%n%ex}), one line per record, so {@code generate} and the other
 * engine commands log as {@code run} does; JUL's default format spends two lines on each. The engine
 * logs through JUL because it has no Spark (and so no log4j) on a GPU host's bundle; inside the job
 * Spark routes JUL to log4j, which prints the same line.
 */
public final class OneLineLogFormat extends Formatter {

  private static final DateTimeFormatter TIME = DateTimeFormatter.ofPattern("HH:mm:ss");

  private final ZoneId zone;

  public OneLineLogFormat() {
    this(ZoneId.systemDefault()); // log4j's %d prints local time too
  }

  OneLineLogFormat(ZoneId zone) {
    this.zone = zone;
  }

  @Override
  public String format(LogRecord r) {
    StringBuilder sb = new StringBuilder()
        .append(TIME.format(Instant.ofEpochMilli(r.getMillis()).atZone(zone))).append(' ')
        .append(level(r.getLevel())).append(' ')
        .append(shortName(r.getLoggerName())).append(": ")
        .append(formatMessage(r)).append('\n');
    if (r.getThrown() != null) {
      StringWriter w = new StringWriter();
      r.getThrown().printStackTrace(new PrintWriter(w));
      sb.append(w);
    }
    return sb.toString();
  }

  /** log4j's level names for JUL's: WARNING → WARN, SEVERE → ERROR, FINE... → DEBUG/TRACE. */
  static String level(Level l) {
    int v = l.intValue();
    if (v >= Level.SEVERE.intValue()) return "ERROR";
    if (v >= Level.WARNING.intValue()) return "WARN";
    if (v >= Level.INFO.intValue()) return "INFO";
    if (v >= Level.FINE.intValue()) return "DEBUG";
    return "TRACE";
  }

  /** %c{1}: the last part of the logger's name. */
  static String shortName(String logger) {
    if (logger == null) return "";
    int dot = logger.lastIndexOf('.');
    return dot < 0 ? logger : logger.substring(dot + 1);
  }

  /**
   * Puts this format on the root logger's console handler (stderr), unless a JUL configuration file
   * was given ({@code -Djava.util.logging.config.file}), which then decides.
   */
  public static void install() {
    if (System.getProperty("java.util.logging.config.file") != null
        || System.getProperty("java.util.logging.config.class") != null) {
      return;
    }
    Logger root = Logger.getLogger("");
    boolean found = false;
    for (Handler h : root.getHandlers()) {
      if (h instanceof ConsoleHandler) {
        h.setFormatter(new OneLineLogFormat());
        found = true;
      }
    }
    if (!found) {
      ConsoleHandler h = new ConsoleHandler();
      h.setFormatter(new OneLineLogFormat());
      root.addHandler(h);
    }
  }
}
