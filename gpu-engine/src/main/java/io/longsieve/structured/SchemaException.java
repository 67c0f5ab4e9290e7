package io.longsieve.structured;

/**
 * A JSON Schema that structured output cannot run: malformed, outside the supported subset
 * (docs/structured-output.md), or asking for a value no JSON text satisfies. The message is one line
 * and names the keyword at fault and where it is ({@link #keyword}, {@link #path}).
 */
public final class SchemaException extends IllegalArgumentException {

  private final String keyword;
  private final String path;

  public SchemaException(String keyword, String path, String message) {
    super((keyword == null ? "" : "'" + keyword + "' ") + (path == null || path.isEmpty() ? "" : "at " + path + ": ")
        + message);
    this.keyword = keyword;
    this.path = path;
  }

  /** The keyword at fault, e.g. "format"; null when the schema is not JSON at all. */
  public String keyword() {
    return keyword;
  }

  /** A JSON pointer to the sub-schema holding it, e.g. "#/properties/date"; "#" for the root. */
  public String path() {
    return path;
  }
}
