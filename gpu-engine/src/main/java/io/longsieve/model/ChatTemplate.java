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
import java.util.concurrent.ConcurrentHashMap;

/**
 * Renders chat messages into the prompt text the model was tuned on: the Jinja {@code chat_template}
 * of {@code tokenizer_config.json}, rendered by Jinjava with the settings transformers uses
 * (trim_blocks, lstrip_blocks, one trailing newline dropped). A checkpoint without a template gets
 * a plain "System/User/Assistant" layout, and {@link #hasTemplate()} says which was used.
 *
 * <p><b>Text is data.</b> The template is rendered once; the messages are values in its context and
 * are never read as template code. Jinjava's nested interpretation (rendering an expression's result
 * again when it holds {@code {{} or {@code {%}) is off, so a document that contains Jinja comes out
 * verbatim.
 *
 * <p><b>Bounded.</b> The template itself is code from the checkpoint folder; every render is held to
 * {@link TemplateLimits} (range length, steps, output size, wall clock) and refused with the bound
 * named when it goes past one. {@link #load} renders a small probe conversation, so a template that
 * cannot stay within the bounds is refused when the model is loaded, not on the first document.
 */
public final class ChatTemplate {

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final jinjava.javax.el.CompositeELResolver RESOLVER = new jinjava.javax.el.CompositeELResolver();

  static {
    RESOLVER.add(new PythonStringMethods());
    RESOLVER.add(com.hubspot.jinjava.el.JinjavaInterpreterResolver.DEFAULT_RESOLVER_READ_ONLY);
  }

  // The probe conversation load() renders: short, with a system turn (tried without it when the
  // template rejects system turns, as Mistral's and Gemma's do).
  private static final String PROBE_SYSTEM = "You are a helpful assistant.";
  private static final String PROBE_USER = "Summarise the document below.\n\nThe cat sat on the mat.";

  private final String template;   // null: plain fallback
  private final String bosToken;
  private final String eosToken;
  private final TemplateLimits limits;
  // One Jinjava per output bound (powers of two): the bound is part of JinjavaConfig, and it grows
  // with the conversation so that a long document is not refused for being long.
  private final Map<Long, Jinjava> byOutputBound = new ConcurrentHashMap<>();

  private ChatTemplate(String template, String bosToken, String eosToken, TemplateLimits limits) {
    this.template = template;
    this.bosToken = bosToken;
    this.eosToken = eosToken;
    this.limits = limits;
  }

  private Jinjava jinjava(long outputBound) {
    return byOutputBound.computeIfAbsent(outputBound, bound -> {
      Jinjava j = new Jinjava(JinjavaConfig.newBuilder()
          .withTrimBlocks(true)
          .withLstripBlocks(true)
          .withNestedInterpretationEnabled(false)  // the fix for "document text runs as template code"
          .withMaxOutputSize(bound)
          .withMaxStringLength(bound)
          .withMaxListSize(limits.maxRange())
          .withMaxMapSize(limits.maxRange())
          .withMaxRenderDepth(limits.maxRenderDepth())
          .withNodePreProcessor((node, interpreter) -> TemplateRun.step())
          .withElResolver(RESOLVER)  // Python's str methods first (PythonStringMethods), then Jinjava's own
          .build());
      j.getGlobalContext().registerFunction(new ELFunctionDefinition("", "raise_exception",
          TemplateRun.class, "raiseException", String.class));
      // replaces Jinjava's range, which silently stops at 1000 values
      j.getGlobalContext().registerFunction(new ELFunctionDefinition("", "range",
          TemplateRun.class, "range", Object.class, Object[].class));
      return j;
    });
  }

  /** The checkpoint folder's template, checked against the default bounds with a probe render. */
  public static ChatTemplate load(Path modelDir) {
    return load(modelDir, TemplateLimits.DEFAULT);
  }

  static ChatTemplate load(Path modelDir, TemplateLimits limits) {
    Path file = modelDir.resolve("tokenizer_config.json");
    if (!Files.isRegularFile(file)) return new ChatTemplate(null, "", "", limits);
    JsonNode root;
    try {
      root = JSON.readTree(file.toFile());
    } catch (IOException e) {
      throw new CheckpointException(file + ": not valid JSON: " + e.getMessage(), e);
    }
    if (root == null || !root.isObject()) throw new CheckpointException(file + ": is not a JSON object");
    String template = null;
    Path source = file;
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
          source = jinja;
        } catch (IOException e) {
          throw new CheckpointException(jinja + ": cannot be read: " + e.getMessage(), e);
        }
      }
    }
    if (template != null) template = JinjaCompat.rewrite(applyWhitespaceControl(template));
    if (template != null && template.endsWith("\n")) template = template.substring(0, template.length() - 1);
    ChatTemplate loaded = new ChatTemplate(template, tokenText(root.path("bos_token")), tokenText(root.path("eos_token")), limits);
    if (template != null) loaded.probe(source);
    return loaded;
  }

  /**
   * Renders the probe conversation: a template that goes past a bound on it, or cannot be rendered
   * at all, would fail every document, so the checkpoint is refused here with the file named. A
   * template that rejects the conversation on purpose (raise_exception) is tried without the system
   * turn, since several refuse system turns.
   */
  private void probe(Path source) {
    for (String system : new String[] {PROBE_SYSTEM, null}) {
      Rendered r = renderChecked(system, PROBE_USER);
      if (r.overLimit != null) {
        throw new CheckpointException(source + ": chat_template goes past its bounds on a short probe conversation: " + r.overLimit);
      }
      if (r.error == null) return;
      if (r.raised == null) throw new CheckpointException(source + ": chat_template cannot be rendered: " + r.error);
    }
    throw new CheckpointException(source + ": chat_template rejects a one-message user conversation");
  }

  /**
   * Jinja's "-" markers ({@code {{-}, {@code -%}}, ...) strip the whitespace next to a tag; Jinjava
   * does not honour them on expressions, so they are applied here before rendering. One pass each
   * way, in linear time: the regex form ({@code \\s*(\\{[{%#])-}) rescans a run of whitespace from
   * every position in it, so a template of a million spaces took minutes to load.
   */
  static String applyWhitespaceControl(String t) {
    StringBuilder left = new StringBuilder(t.length());
    for (int i = 0; i < t.length(); i++) {
      if (i + 2 < t.length() && t.charAt(i) == '{' && isTagChar(t.charAt(i + 1), '{') && t.charAt(i + 2) == '-') {
        int end = left.length();
        while (end > 0 && isSpace(left.charAt(end - 1))) end--;
        left.setLength(end);
        left.append('{').append(t.charAt(i + 1));
        i += 2;
      } else {
        left.append(t.charAt(i));
      }
    }
    StringBuilder out = new StringBuilder(left.length());
    for (int i = 0; i < left.length(); i++) {
      if (i + 2 < left.length() && left.charAt(i) == '-' && isTagChar(left.charAt(i + 1), '}') && left.charAt(i + 2) == '}') {
        out.append(left.charAt(i + 1)).append('}');
        i += 3;
        while (i < left.length() && isSpace(left.charAt(i))) i++;
        i--;
      } else {
        out.append(left.charAt(i));
      }
    }
    return out.toString();
  }

  /** The second character of a tag opener ({@code {{ {% {#}) or closer ({@code }} %} #}}). */
  private static boolean isTagChar(char c, char brace) {
    return c == brace || c == '%' || c == '#';
  }

  /** Java regex's \\s: space, tab, newline, vertical tab, form feed, carriage return. */
  private static boolean isSpace(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == 0x0B || c == '\f' || c == '\r';
  }

  private static String tokenText(JsonNode n) {
    if (n.isTextual()) return n.asText();
    if (n.isObject()) return n.path("content").asText("");
    return "";
  }

  public boolean hasTemplate() {
    return template != null;
  }

  /**
   * The roles a conversation may use, as the template treats them: user always; system when a
   * system turn renders and its text reaches the prompt (Gemma 3 folds it into the first user turn,
   * Mistral-Nemo into the last; a template may also refuse it); assistant when a user, assistant,
   * user conversation renders with the assistant's text in it. For {@code inspect}.
   */
  public java.util.List<String> roles() {
    java.util.List<String> roles = new ArrayList<>();
    String sys = "probe-system-text", said = "probe-assistant-text";
    if (accepts(List.of(new Message("system", sys), new Message("user", PROBE_USER)), sys)) roles.add("system");
    roles.add("user");
    if (accepts(List.of(new Message("user", PROBE_USER), new Message("assistant", said), new Message("user", PROBE_USER)),
        said)) {
      roles.add("assistant");
    }
    return roles;
  }

  private boolean accepts(List<Message> conversation, String text) {
    try {
      return render(conversation).contains(text);
    } catch (IllegalArgumentException e) {
      return false;
    }
  }

  /** The eos_token named in tokenizer_config.json ("" if none). */
  public String eosToken() {
    return eosToken;
  }

  /**
   * Prompt text for one user turn (and an optional system turn), ending where the assistant speaks.
   * The texts are passed as values and come out as they are, whatever Jinja they hold.
   *
   * @throws IllegalArgumentException when the template rejects the conversation (its
   *     raise_exception) or the render goes past a bound of {@link TemplateLimits}; one line
   */
  public String render(String system, String user) {
    if (template == null) {
      return (system != null ? "System: " + system + "\n\n" : "") + "User: " + user + "\n\nAssistant:";
    }
    return checked(renderChecked(system, user));
  }

  /** One turn of a conversation: role system, user or assistant, and its text. */
  public record Message(String role, String content) {}

  /**
   * Prompt text for a whole conversation (earlier assistant turns included), ending where the
   * assistant speaks next; the plain fallback writes "System:", "User:" and "Assistant:" turns. The
   * texts are values, as in {@link #render(String, String)}.
   *
   * @throws IllegalArgumentException as {@link #render(String, String)}
   */
  public String render(List<Message> conversation) {
    if (template == null) {
      StringBuilder sb = new StringBuilder();
      for (Message m : conversation) {
        String role = m.role().isEmpty() ? m.role() : Character.toUpperCase(m.role().charAt(0)) + m.role().substring(1);
        sb.append(role).append(": ").append(m.content()).append("\n\n");
      }
      return sb.append("Assistant:").toString();
    }
    List<Map<String, Object>> messages = new ArrayList<>();
    for (Message m : conversation) messages.add(Map.of("role", m.role(), "content", m.content()));
    return checked(renderChecked(messages));
  }

  private static String checked(Rendered r) {
    if (r.overLimit != null) throw new IllegalArgumentException("chat template stopped: it went past its bounds: " + r.overLimit);
    if (r.error != null) {
      throw new IllegalArgumentException("chat template rejected the conversation: " + (r.raised != null ? r.raised : r.error));
    }
    return r.output;
  }

  /** The outcome of one render: the output, or why there is none. */
  private record Rendered(String output, String overLimit, String raised, String error) {}

  private Rendered renderChecked(String system, String user) {
    List<Map<String, Object>> messages = new ArrayList<>();
    if (system != null) messages.add(Map.of("role", "system", "content", system));
    messages.add(Map.of("role", "user", "content", user));
    return renderChecked(messages);
  }

  private Rendered renderChecked(List<Map<String, Object>> messages) {
    long inputChars = bosToken.length() + eosToken.length();
    for (Map<String, Object> m : messages) inputChars += ((String) m.get("content")).length();
    Map<String, Object> vars = new HashMap<>();
    vars.put("messages", messages);
    vars.put("add_generation_prompt", true);
    vars.put("bos_token", bosToken);
    vars.put("eos_token", eosToken);
    long bound = outputBound(limits.maxOutput(inputChars));
    TemplateRun run = TemplateRun.begin(limits);
    try {
      RenderResult r = jinjava(bound).renderForResult(template, vars);
      if (run.overLimit() != null) return new Rendered(null, run.overLimit(), null, null);
      for (TemplateError e : r.getErrors()) {
        if (e.getReason() == TemplateError.ErrorReason.OUTPUT_TOO_BIG) {
          return new Rendered(null, "output of more than " + bound + " characters", null, null);
        }
      }
      for (TemplateError e : r.getErrors()) {
        if (e.getSeverity() == TemplateError.ErrorType.FATAL) return new Rendered(null, null, run.raised(), oneLine(e.getMessage()));
      }
      return new Rendered(r.getOutput(), null, null, null);
    } catch (StackOverflowError e) {
      // deeply nested expressions recurse in Jinjava's parser; the thread's stack is intact again here
      return new Rendered(null, "nesting too deep for the parser", null, null);
    } finally {
      run.end();
    }
  }

  /** The next power of two at or above {@code chars}, so that few Jinjava instances are built. */
  private static long outputBound(long chars) {
    return chars <= 1 ? 1 : Long.highestOneBit(chars - 1) << 1;
  }

  private static String oneLine(String s) {
    return s == null ? "unknown error" : s.replace('\n', ' ').replace('\r', ' ');
  }
}
