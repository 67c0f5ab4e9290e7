package io.longsieve.model;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.hubspot.jinjava.Jinjava;
import com.hubspot.jinjava.JinjavaConfig;
import com.hubspot.jinjava.interpret.RenderResult;
import com.hubspot.jinjava.interpret.TemplateError;
import com.hubspot.jinjava.lib.fn.ELFunctionDefinition;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Renders chat messages into the prompt text the model was tuned on: the Jinja {@code chat_template}
 * of {@code tokenizer_config.json}, rendered by Jinjava with the settings transformers uses
 * (trim_blocks, lstrip_blocks, one trailing newline dropped). A checkpoint without a template gets
 * a plain "System/User/Assistant" layout, and {@link #hasTemplate()} says which was used.
 */
public final class ChatTemplate {

  private static final ObjectMapper JSON = new ObjectMapper();

  private final String template;   // null: plain fallback
  private final String bosToken;
  private final String eosToken;
  private final Jinjava jinjava;

  private ChatTemplate(String template, String bosToken, String eosToken) {
    this.template = template;
    this.bosToken = bosToken;
    this.eosToken = eosToken;
    this.jinjava = new Jinjava(JinjavaConfig.newBuilder().withTrimBlocks(true).withLstripBlocks(true).build());
    jinjava.getGlobalContext().registerFunction(new ELFunctionDefinition("", "raise_exception",
        ChatTemplate.class, "raiseException", String.class));
  }

  // Jinjava wraps exceptions from functions in a generic message; keep the template's own words.
  private static final ThreadLocal<String> RAISED = new ThreadLocal<>();

  /** Called by templates that reject a conversation (e.g. roles out of order). */
  public static String raiseException(String message) {
    RAISED.set(message);
    throw new IllegalArgumentException("chat template: " + message);
  }

  public static ChatTemplate load(Path modelDir) {
    Path file = modelDir.resolve("tokenizer_config.json");
    if (!Files.isRegularFile(file)) return new ChatTemplate(null, "", "");
    JsonNode root;
    try {
      root = JSON.readTree(file.toFile());
    } catch (IOException e) {
      throw new CheckpointException(file + ": not valid JSON: " + e.getMessage(), e);
    }
    String template = null;
    JsonNode t = root.path("chat_template");
    if (t.isTextual()) template = t.asText();
    else if (t.isArray()) {
      for (JsonNode named : t) if (named.path("name").asText().equals("default")) template = named.path("template").asText();
    }
    if (template == null) {
      Path jinja = modelDir.resolve("chat_template.jinja");
      if (Files.isRegularFile(jinja)) {
        try {
          template = Files.readString(jinja);
        } catch (IOException e) {
          throw new CheckpointException(jinja + ": cannot be read: " + e.getMessage(), e);
        }
      }
    }
    if (template != null) template = applyWhitespaceControl(template);
    if (template != null && template.endsWith("\n")) template = template.substring(0, template.length() - 1);
    return new ChatTemplate(template, tokenText(root.path("bos_token")), tokenText(root.path("eos_token")));
  }

  /**
   * Jinja's "-" markers ({@code {{-}, {@code -%}}, ...) strip the whitespace next to a tag; Jinjava
   * does not honour them on expressions, so they are applied here before rendering.
   */
  static String applyWhitespaceControl(String t) {
    return t.replaceAll("\\s*(\\{[{%#])-", "$1").replaceAll("-([}%#]\\})\\s*", "$1");
  }

  private static String tokenText(JsonNode n) {
    if (n.isTextual()) return n.asText();
    if (n.isObject()) return n.path("content").asText("");
    return "";
  }

  public boolean hasTemplate() {
    return template != null;
  }

  /** The eos_token named in tokenizer_config.json ("" if none). */
  public String eosToken() {
    return eosToken;
  }

  /** Prompt text for one user turn (and an optional system turn), ending where the assistant speaks. */
  public String render(String system, String user) {
    List<Map<String, Object>> messages = new ArrayList<>();
    if (system != null) messages.add(Map.of("role", "system", "content", system));
    messages.add(Map.of("role", "user", "content", user));
    if (template == null) {
      return (system != null ? "System: " + system + "\n\n" : "") + "User: " + user + "\n\nAssistant:";
    }
    Map<String, Object> vars = new HashMap<>();
    vars.put("messages", messages);
    vars.put("add_generation_prompt", true);
    vars.put("bos_token", bosToken);
    vars.put("eos_token", eosToken);
    RAISED.remove();
    RenderResult r = jinjava.renderForResult(template, vars);
    for (TemplateError e : r.getErrors()) {
      if (e.getSeverity() == TemplateError.ErrorType.FATAL) {
        String raised = RAISED.get();
        RAISED.remove();
        throw new IllegalArgumentException("chat template rejected the conversation: "
            + (raised != null ? raised : e.getMessage()));
      }
    }
    return r.getOutput();
  }
}
