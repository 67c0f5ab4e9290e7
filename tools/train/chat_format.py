"""The chat layout of the longsieve-needle model, in one place (no torch).

The model is trained on exactly the strings that transformers' apply_chat_template and the Java
engine's ChatTemplate (Jinjava) render from CHAT_TEMPLATE for one user turn with
add_generation_prompt=True, followed by the answer and the end token:

    <s><|user|>
    {user message}
    <|assistant|>
    {answer}<|end|>
"""

BOS = "<s>"
END = "<|end|>"          # eos: ends the assistant turn
PAD = "<pad>"
USER = "<|user|>"
ASSISTANT = "<|assistant|>"
SYSTEM = "<|system|>"
SPECIAL_TOKENS = [BOS, END, PAD, USER, ASSISTANT, SYSTEM]

# One line of Jinja (real newline characters inside the string literals): no block tag is followed
# by a newline, so trim_blocks/lstrip_blocks change nothing and transformers and Jinjava agree.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\n' + message['content'] }}"
    "{% if message['role'] == 'assistant' %}{{ eos_token }}{% endif %}"
    "{{ '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)


def render_prompt(user, system=None):
    """What CHAT_TEMPLATE renders for [system?, user] with add_generation_prompt=True."""
    s = BOS
    if system is not None:
        s += SYSTEM + "\n" + system + "\n"
    return s + USER + "\n" + user + "\n" + ASSISTANT + "\n"
