package io.longsieve.job;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Function;
import java.util.regex.Pattern;

/**
 * A prompt template: text with {@code {name}} placeholders, {@code {{} and {@code }}} for literal
 * braces. The names are {@code text}, {@code documents}, {@code question} or any other input column
 * ({@link PromptBuilder} says what each one gives).
 *
 * <p><b>Values are data.</b> The template is parsed once, here; {@link #render} puts each value in its
 * place and never reads a value as template text, so a document that holds {@code {question}} (or
 * Jinja, which the chat template then treats as data too) comes out as it is.
 */
public final class PromptTemplate implements Serializable {

  /** A placeholder name: an input column name as JSON and Parquet write them. */
  private static final Pattern NAME = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*");

  /** The names a template may take the document part from, the part --truncate shortens. */
  static final Set<String> BODY = Set.of("text", "documents");

  /** Literal text, or a placeholder when {@code name} is set. */
  private record Part(String literal, String name) implements Serializable {}

  private final String source;
  private final List<Part> parts;

  private PromptTemplate(String source, List<Part> parts) {
    this.source = source;
    this.parts = parts;
  }

  /**
   * Parses {@code template}.
   *
   * @throws IllegalArgumentException one line naming the first fault and its character position: an
   *     unbalanced brace, an empty placeholder or a name that is not a column name
   */
  public static PromptTemplate parse(String template) {
    if (template == null || template.isBlank()) throw new IllegalArgumentException("the prompt template is empty");
    List<Part> parts = new ArrayList<>();
    StringBuilder lit = new StringBuilder();
    int n = template.length();
    for (int i = 0; i < n; i++) {
      char c = template.charAt(i);
      if (c == '{' && i + 1 < n && template.charAt(i + 1) == '{') {
        lit.append('{');
        i++;
      } else if (c == '}' && i + 1 < n && template.charAt(i + 1) == '}') {
        lit.append('}');
        i++;
      } else if (c == '}') {
        throw new IllegalArgumentException("unbalanced '}' at character " + i + " of the prompt template (write }} for a literal brace)");
      } else if (c == '{') {
        int end = template.indexOf('}', i + 1);
        int nextOpen = template.indexOf('{', i + 1);
        if (end < 0 || (nextOpen >= 0 && nextOpen < end)) {
          throw new IllegalArgumentException("unbalanced '{' at character " + i + " of the prompt template (write {{ for a literal brace)");
        }
        String name = template.substring(i + 1, end).strip();
        if (!NAME.matcher(name).matches()) {
          throw new IllegalArgumentException("placeholder {" + template.substring(i + 1, end) + "} at character " + i
              + " of the prompt template is not a column name (letters, digits, _)");
        }
        if (lit.length() > 0) parts.add(new Part(lit.toString(), null));
        lit.setLength(0);
        parts.add(new Part(null, name));
        i = end;
      } else {
        lit.append(c);
      }
    }
    if (lit.length() > 0) parts.add(new Part(lit.toString(), null));
    return new PromptTemplate(template, List.copyOf(parts));
  }

  /** The placeholder names, in order of first use. */
  public Set<String> placeholders() {
    Set<String> s = new LinkedHashSet<>();
    for (Part p : parts) if (p.name != null) s.add(p.name);
    return s;
  }

  /** The template as written. */
  public String source() {
    return source;
  }

  /**
   * The prompt, split around the first {@code {text}} or {@code {documents}} placeholder (the body,
   * the only part --truncate cuts); a template without one has an empty body.
   *
   * @param values a placeholder's value; throws IllegalArgumentException for a name it cannot fill
   */
  PromptBuilder.Prompt render(Function<String, String> values) {
    StringBuilder head = new StringBuilder();
    StringBuilder tail = new StringBuilder();
    String body = null;
    for (Part p : parts) {
      StringBuilder to = body == null ? head : tail;
      if (p.name == null) {
        to.append(p.literal);
      } else if (body == null && BODY.contains(p.name)) {
        body = values.apply(p.name);
      } else {
        to.append(values.apply(p.name));
      }
    }
    return body == null ? new PromptBuilder.Prompt(head.toString(), "", "")
        : new PromptBuilder.Prompt(head.toString(), body, tail.toString());
  }

  /**
   * The prompt's text up to its first placeholder other than {@code {text}} and {@code {documents}}
   * (the question, or any other column): what rows over the same document(s) have in common, the part
   * prefix reuse computes once. The whole prompt when the template has no such placeholder.
   *
   * @param values a placeholder's value, as {@link #render} takes them
   */
  String sharedHead(Function<String, String> values) {
    StringBuilder head = new StringBuilder();
    for (Part p : parts) {
      if (p.name == null) head.append(p.literal);
      else if (BODY.contains(p.name)) head.append(values.apply(p.name));
      else break;
    }
    return head.toString();
  }

  @Override
  public String toString() {
    return source;
  }
}
