package io.longsieve.job;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.longsieve.engine.spi.SamplingParams;
import io.longsieve.structured.OutputSchema;
import io.longsieve.structured.SchemaException;
import java.io.Serializable;
import io.longsieve.job.RunOptions.Key;
import java.util.List;
import java.util.Map;

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
 * @param jsonSchema     the run's JSON schema ({@code --json-schema FILE} or spark.longsieve.jsonSchema), parsed on
 *                       the driver so a bad one is refused before Spark starts; null: free text unless a row has one
 * @param typedOutput    with a run-level schema, outputs get an {@code answer} column typed from it ({@link AnswerColumn})
 */
public record GenerationOptions(PromptTemplate promptTemplate, String system, boolean raw, double temperature,
    double topP, long seed, List<String> stop, OutputSchema jsonSchema, boolean typedOutput) implements Serializable {

  public static final GenerationOptions DEFAULTS = new GenerationOptions(null, null, false, 0, 1, 0, List.of());

  /** Options without a JSON schema. */
  public GenerationOptions(PromptTemplate promptTemplate, String system, boolean raw, double temperature, double topP,
      long seed, List<String> stop) {
    this(promptTemplate, system, raw, temperature, topP, seed, stop, null, false);
  }

  private static final ObjectMapper JSON = new ObjectMapper();

  public GenerationOptions {
    stop = stop == null ? List.of() : List.copyOf(stop);
    new SamplingParams(temperature, topP, seed); // its own checks, here on the driver
    for (String s : stop) if (s.isEmpty()) throw new IllegalArgumentException("a stop string is empty");
    if (typedOutput && jsonSchema == null) {
      throw new IllegalArgumentException("--typed-output (" + Key.TYPED_OUTPUT.conf() + ") needs a run-level --json-schema");
    }
  }

  /** The run's prompt and sampling settings from {@link RunOptions}' keys; a bad template or value is refused with its key named. */
  static GenerationOptions from(Map<Key, String> values) {
    String text = RunOptions.value(values, Key.PROMPT_TEMPLATE);
    String file = RunOptions.value(values, Key.PROMPT_TEMPLATE_FILE);
    if (text != null && file != null) {
      throw new IllegalArgumentException("give " + Key.PROMPT_TEMPLATE.conf() + " or --prompt-template FILE, not both");
    }
    String where = Key.PROMPT_TEMPLATE.conf();
    if (file != null) {
      where = "--prompt-template " + file;
      try {
        text = java.nio.file.Files.readString(java.nio.file.Path.of(file));
      } catch (java.io.IOException | RuntimeException e) {
        throw new IllegalArgumentException("cannot read " + where + ": " + e.getMessage());
      }
    }
    PromptTemplate template = null;
    if (text != null) {
      try {
        template = PromptTemplate.parse(text);
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException(where + ": " + e.getMessage());
      }
    }
    double temperature = RunOptions.number(values, Key.TEMPERATURE);
    if (!(temperature >= 0)) throw new IllegalArgumentException(Key.TEMPERATURE.conf() + " must be >= 0, not " + temperature);
    if (temperature > 0 && temperature < SamplingParams.MIN_TEMPERATURE) {
      throw new IllegalArgumentException(Key.TEMPERATURE.conf() + " must be 0 (greedy) or at least "
          + SamplingParams.MIN_TEMPERATURE + ", not " + temperature + " (smaller ones overflow the sampler)");
    }
    double topP = RunOptions.number(values, Key.TOP_P);
    if (!(topP > 0 && topP <= 1)) throw new IllegalArgumentException(Key.TOP_P.conf() + " must be in (0, 1], not " + topP);
    List<String> stop = GenerationOptions.parseStop(Key.STOP.conf(), RunOptions.value(values, Key.STOP));
    if (stop.contains("")) throw new IllegalArgumentException(Key.STOP.conf() + " holds an empty string");
    return new GenerationOptions(template, RunOptions.value(values, Key.SYSTEM), RunOptions.bool(values, Key.RAW), temperature, topP,
        RunOptions.longAtLeast(values, Key.SEED, Long.MIN_VALUE), stop, jsonSchema(values),
        RunOptions.bool(values, Key.TYPED_OUTPUT));
  }

  /** The run's JSON schema from its text or its file; refused in one line naming the keyword at fault. */
  private static OutputSchema jsonSchema(Map<Key, String> values) {
    String text = RunOptions.value(values, Key.JSON_SCHEMA);
    String file = RunOptions.value(values, Key.JSON_SCHEMA_FILE);
    if (text != null && file != null) {
      throw new IllegalArgumentException("give " + Key.JSON_SCHEMA.conf() + " or --json-schema FILE, not both");
    }
    String where = Key.JSON_SCHEMA.conf();
    if (file != null) {
      where = "--json-schema " + file;
      try {
        text = java.nio.file.Files.readString(java.nio.file.Path.of(file));
      } catch (java.io.IOException | RuntimeException e) {
        throw new IllegalArgumentException("cannot read " + where + ": " + e.getMessage());
      }
    }
    if (text == null) return null;
    try {
      return OutputSchema.parse(text);
    } catch (SchemaException e) {
      throw new IllegalArgumentException(where + ": " + e.getMessage());
    }
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
