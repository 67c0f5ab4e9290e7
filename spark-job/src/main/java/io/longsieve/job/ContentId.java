package io.longsieve.job;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;

/**
 * The doc_id of a row that has none: {@code auto-} and the first 16 hex digits (64 bits) of the
 * SHA-256 of the row's canonical JSON (object keys sorted at every level, no whitespace, strings and
 * numbers as Jackson writes them). It depends only on the row's content, so it stays the same when
 * lines move or files are renamed, and {@code --resume} finds the row again. Two rows with the same
 * content get the same id, so the later one is a duplicate_id, as it should be.
 */
final class ContentId {
  private ContentId() {}

  static final String PREFIX = "auto-";

  static String of(JsonNode row) {
    StringBuilder sb = new StringBuilder();
    canonical(row, sb);
    try {
      byte[] hash = MessageDigest.getInstance("SHA-256").digest(sb.toString().getBytes(StandardCharsets.UTF_8));
      return PREFIX + HexFormat.of().formatHex(hash, 0, 8);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JVM has SHA-256", e);
    }
  }

  /** Appends the canonical JSON of {@code n}. */
  static void canonical(JsonNode n, StringBuilder sb) {
    if (n.isObject()) {
      List<String> names = new ArrayList<>();
      n.fieldNames().forEachRemaining(names::add);
      names.sort(null);
      sb.append('{');
      for (int i = 0; i < names.size(); i++) {
        if (i > 0) sb.append(',');
        sb.append(com.fasterxml.jackson.databind.node.TextNode.valueOf(names.get(i))).append(':');
        canonical(n.get(names.get(i)), sb);
      }
      sb.append('}');
    } else if (n.isArray()) {
      sb.append('[');
      int i = 0;
      for (Iterator<JsonNode> it = n.elements(); it.hasNext(); i++) {
        if (i > 0) sb.append(',');
        canonical(it.next(), sb);
      }
      sb.append(']');
    } else {
      sb.append(n); // a scalar's toString is its JSON
    }
  }
}
