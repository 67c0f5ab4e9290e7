package io.longsieve.job;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.longsieve.engine.spi.SamplingParams;
import java.io.Serializable;
import java.util.List;

/**
 * How each document is prompted and sampled unless its row says otherwise ({@link RowSettings}: the
 * row's value wins), part of {@link RunOptions}. Greedy by default.
 *
 * @param promptTemplate the run's prompt template ({@code --prompt-template FILE} or the key
 *                       spark.longsieve.promptTemplate), parsed on the driver so a bad one is refused
 *                       before Spark starts; null: each row's task preset
 * @param system         system message for the chat template; null for none
 * @param raw            true: prompts go to the model as they are, no chat template
 * @param temperature    0 is greedy (argmax); above 0 samples, seeded
 * @param topP           nucleus sampling mass, in (0, 1]
 * @param seed           the sampler's seed, the same for every document unless its row sets one
 * @param stop           strings that end an output (not included in it)
 */
public record GenerationOptions(PromptTemplate promptTemplate, String system, boolean raw, double temperature,
    double topP, long seed, List<String> stop) implements Serializable {

  public static final GenerationOptions DEFAULTS = new GenerationOptions(null, null, false, 0, 1, 0, List.of());

  private static final ObjectMapper JSON = new ObjectMapper();

  public GenerationOptions {
    stop = stop == null ? List.of() : List.copyOf(stop);
    new SamplingParams(temperature, topP, seed); // its own checks, here on the driver
    for (String s : stop) if (s.isEmpty()) throw new IllegalArgumentException("a stop string is empty");
  }

  /**
   * Stop strings from a setting: a JSON array of strings ({@code ["\n\n", "END"]}), else the value is one
   * stop string; empty for none.
   */
  static List<String> parseStop(String key, String value) {
    if (value == null || value.isEmpty()) return List.of();
    if (!value.startsWith("[")) return List.of(value);
    try {
      return List.of(JSON.readValue(value, String[].class));
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException(key + " must be a JSON array of strings or one string, not '" + value + "'");
    }
  }

  /** Stop strings as a setting value, read back by {@link #parseStop}. */
  static String formatStop(List<String> stop) {
    try {
      return JSON.writeValueAsString(stop);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }
}
