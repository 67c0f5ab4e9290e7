package io.longsieve.job;

import com.fasterxml.jackson.databind.JsonNode;
import io.longsieve.engine.spi.SamplingParams;
import io.longsieve.job.DocumentParser.BadInput;
import java.util.ArrayList;
import java.util.List;

/**
 * A row's own generation settings, read from its JSON by {@link DocumentParser}; null where the row
 * gives none, and the run's value ({@link GenerationOptions}) applies.
 *
 * @param system       system message
 * @param raw          true: the prompt as is, no chat template
 * @param maxNewTokens most tokens generated, >= 1
 * @param temperature  >= 0; 0 is greedy
 * @param topP         in (0, 1]
 * @param seed         the sampler's seed: the same row and seed give the same output, on a retry too
 * @param stop         strings that end the output (not included)
 */
record RowSettings(String system, Boolean raw, Integer maxNewTokens, Double temperature, Double topP, Long seed,
    List<String> stop) {

  static RowSettings of(JsonNode root) throws BadInput {
    Integer maxNew = null;
    Long max = integer(root, "max_new_tokens");
    if (max != null) {
      if (max < 1 || max > Integer.MAX_VALUE) throw new BadInput("field 'max_new_tokens' must be >= 1, not " + max);
      maxNew = (int) (long) max;
    }
    Double t = number(root, "temperature");
    if (t != null && !(t >= 0)) throw new BadInput("field 'temperature' must be >= 0, not " + t);
    if (t != null && t > 0 && t < SamplingParams.MIN_TEMPERATURE) {
      throw new BadInput("field 'temperature' must be 0 (greedy) or at least " + SamplingParams.MIN_TEMPERATURE + ", not " + t
          + " (smaller ones overflow the sampler)");
    }
    Double p = number(root, "top_p");
    if (p != null && !(p > 0 && p <= 1)) throw new BadInput("field 'top_p' must be in (0, 1], not " + p);
    return new RowSettings(DocumentParser.optionalString(root, "system"), bool(root, "raw"), maxNew, t, p,
        integer(root, "seed"), stop(root.get("stop")));
  }

  private static Boolean bool(JsonNode root, String field) throws BadInput {
    JsonNode n = root.get(field);
    if (n == null || n.isNull()) return null;
    if (!n.isBoolean()) throw new BadInput("field '" + field + "' must be true or false, not " + DocumentParser.kind(n));
    return n.booleanValue();
  }

  private static Long integer(JsonNode root, String field) throws BadInput {
    JsonNode n = root.get(field);
    if (n == null || n.isNull()) return null;
    if (!n.isIntegralNumber() || !n.canConvertToLong()) {
      throw new BadInput("field '" + field + "' must be an integer, not " + (n.isNumber() ? n.asText() : DocumentParser.kind(n)));
    }
    return n.longValue();
  }

  private static Double number(JsonNode root, String field) throws BadInput {
    JsonNode n = root.get(field);
    if (n == null || n.isNull()) return null;
    if (!n.isNumber()) throw new BadInput("field '" + field + "' must be a number, not " + DocumentParser.kind(n));
    return n.doubleValue();
  }

  /** A string, or an array of non-empty strings. */
  static List<String> stop(JsonNode n) throws BadInput {
    if (n == null || n.isNull()) return null;
    List<String> out = new ArrayList<>();
    if (n.isTextual()) {
      out.add(n.asText());
    } else if (n.isArray()) {
      for (JsonNode e : n) {
        if (!e.isTextual()) throw new BadInput("field 'stop' must hold strings, not " + DocumentParser.kind(e));
        out.add(e.asText());
      }
    } else {
      throw new BadInput("field 'stop' must be a string or an array of strings, not " + DocumentParser.kind(n));
    }
    for (String s : out) if (s.isEmpty()) throw new BadInput("field 'stop' holds an empty string");
    return out;
  }
}
