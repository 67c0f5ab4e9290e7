package io.longsieve.cli;

import io.longsieve.model.CheckpointException;
import java.io.FileNotFoundException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.file.FileSystemException;
import java.util.function.Consumer;
import picocli.CommandLine;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;

/**
 * How every LongSieve command line ends when something is wrong: one line on stderr, never a usage
 * page or a stack trace, and an exit code a script can tell apart.
 * <ul>
 *   <li>An argument error (an unknown or repeated option, a value of the wrong type, a missing
 *       required option): the error and where help is, exit 2.</li>
 *   <li>What the user can fix (a bad checkpoint, option, path or a device this build or machine cannot
 *       use: {@link #isUserError}): the message, exit 2.</li>
 *   <li>Anything else: the exception's class and message, exit 1.</li>
 * </ul>
 * The stack trace goes to the log (given to {@link #install}) and, with {@code --debug}, which every
 * subcommand gets, to stderr after the line.
 */
public final class OneLineErrors {
  private OneLineErrors() {}

  /** Exit code of a usage or user error (the same as picocli's for usage errors). */
  public static final int USER_ERROR = 2;
  /** Exit code of an unexpected error. */
  public static final int UNEXPECTED = 1;

  /**
   * Installs the handlers on {@code cl} and every subcommand, adding {@code --debug} where a command
   * has none; {@code trace} gets each failure's stack trace (the log).
   */
  public static CommandLine install(CommandLine cl, Consumer<Throwable> trace) {
    addDebug(cl);
    cl.setParameterExceptionHandler((e, args) -> {
      CommandLine cmd = e.getCommandLine();
      PrintWriter err = cmd.getErr();
      String name = cmd.getCommandSpec().qualifiedName();
      err.println(name + ": " + firstLine(e.getMessage()) + " (see '" + name + " --help')");
      err.flush();
      return USER_ERROR;
    });
    cl.setExecutionExceptionHandler((e, cmd, parsed) -> {
      PrintWriter err = cmd.getErr();
      String name = cmd.getCommandSpec().qualifiedName();
      boolean user = isUserError(e);
      err.println(user ? name + ": " + firstLine(e.getMessage())
          : name + " failed: " + e.getClass().getName() + ": " + firstLine(e.getMessage())
              + " (--debug prints the stack trace)");
      trace.accept(e);
      if (debug(parsed)) e.printStackTrace(err);
      err.flush();
      return user ? USER_ERROR : UNEXPECTED;
    });
    return cl;
  }

  /**
   * What a user can fix: an argument or state the command refuses (IllegalArgumentException,
   * IllegalStateException), a checkpoint that does not load, a file that is missing or unreadable.
   */
  public static boolean isUserError(Throwable e) {
    Throwable t = e instanceof UncheckedIOException u && u.getCause() != null ? u.getCause() : e;
    return t instanceof IllegalArgumentException || t instanceof IllegalStateException
        || t instanceof CheckpointException || t instanceof FileSystemException || t instanceof FileNotFoundException;
  }

  /** The first line of a message: some carry a plan or a list on the lines below. */
  public static String firstLine(String message) {
    return String.valueOf(message).lines().findFirst().orElse("");
  }

  private static boolean debug(CommandLine.ParseResult parsed) {
    for (CommandLine.ParseResult p = parsed; p != null; p = p.subcommand()) {
      if (p.hasMatchedOption("--debug")) return true;
    }
    return false;
  }

  private static void addDebug(CommandLine cl) {
    CommandSpec spec = cl.getCommandSpec();
    if (spec.findOption("--debug") == null && spec.parent() != null) {
      spec.addOption(OptionSpec.builder("--debug").type(boolean.class).arity("0")
          .description("Print the stack trace of an error after its one line.").build());
    }
    for (CommandLine sub : cl.getSubcommands().values()) addDebug(sub);
  }
}
