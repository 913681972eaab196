"""Rendering a tokenizer's chat template as transformers' ``apply_chat_template`` does:
Jinja2 in an immutable sandbox (a template is data from a model folder, never trusted
code), blocks trimmed, ``loopcontrols``, ``tojson`` keeping non-ASCII text,
``raise_exception`` and ``strftime_now``, and ``{% generation %}`` blocks rendered as
their content (Canopy keeps no assistant-token masks).

Jinja2 is imported on first use (Debian: python3-jinja2; pip: ``canopy-client[chat]``),
so clients that never render a chat need not install it.
"""

import datetime
import functools
import json


def _raise_exception(message):
    from jinja2.exceptions import TemplateError
    raise TemplateError(message)


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent,
                      separators=separators, sort_keys=sort_keys)


def _strftime_now(format):
    return datetime.datetime.now().strftime(format)


@functools.lru_cache(maxsize=1)
def _environment():
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationBlock(jinja2.ext.Extension):
        """``{% generation %}...{% endgeneration %}`` marks the assistant's tokens for
        training masks; rendering keeps its body as it is."""
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.Scope(body, lineno=lineno)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


@functools.lru_cache(maxsize=16)
def _compiled(source):
    return _environment().from_string(source)


def pick_template(templates, chat_template):
    """The Jinja source to render: ``chat_template`` when it names one of the
    tokenizer's ``templates`` ({name: source}) or is itself a template, else the
    tokenizer's default. ValueError, as transformers raises, when there is none."""
    if chat_template is not None:
        return templates.get(chat_template, chat_template)
    if "default" in templates:
        return templates["default"]
    if templates:
        raise ValueError(f"this tokenizer has several chat templates and none is the default: "
                         f"name one of {sorted(templates)} as chat_template")
    raise ValueError("Cannot use chat template functions because tokenizer.chat_template is "
                     "not set and no template argument was passed! The model's "
                     "tokenizer_config.json names none.")


def _final_text(message):
    """The text the final message ends with (its content, or the last text part)."""
    content = message["content"]
    if isinstance(content, (list, tuple)):
        texts = [part["text"] for part in content if part.get("type") == "text"]
        if not texts:
            raise ValueError("continue_final_message needs text in the final message")
        content = texts[-1]
    return content.strip()


def render(source, conversation, *, tools=None, documents=None, add_generation_prompt=False,
           continue_final_message=False, special_tokens=None, **variables):
    """The text of one ``conversation`` (a list of {"role", "content"} dicts) under the
    template ``source``. ``special_tokens`` ({"bos_token": ...}) and ``variables`` are
    the template's other names (``enable_thinking``, ``reasoning_effort``, ...)."""
    if continue_final_message and add_generation_prompt:
        raise ValueError("continue_final_message and add_generation_prompt are not compatible: "
                         "use continue_final_message to continue the final message, "
                         "add_generation_prompt to start a new assistant message")
    if tools is not None and any(not isinstance(tool, dict) for tool in tools):
        raise TypeError("tools must be JSON-schema dicts (Canopy does not read Python "
                        "functions' docstrings into schemas)")
    messages = [dict(message) for message in conversation]
    text = _compiled(source).render(messages=messages, tools=tools, documents=documents,
                                    add_generation_prompt=add_generation_prompt,
                                    **(special_tokens or {}), **variables)
    if continue_final_message:
        final = _final_text(messages[-1])
        end = text.rfind(final)
        if end < 0:
            raise ValueError("continue_final_message: the final message's text is not in the "
                             "rendered chat (the template changes it)")
        text = text[:end + len(final)]
    return text


def apply(tokenizer, templates, conversation, *, chat_template=None, tokenize=True,
          return_dict=False, return_tensors=None, tokenizer_kwargs=None, **kwargs):
    """transformers' ``apply_chat_template`` over ``tokenizer`` (its ``encode`` and
    special tokens): a conversation or a list of them; text, ids (encoded without the
    tokenizer's own special tokens: the template writes them), or
    ``{"input_ids", "attention_mask"}``. Padding and truncation are not offered."""
    for unsupported in ("padding", "truncation", "max_length", "return_assistant_tokens_mask"):
        if kwargs.pop(unsupported, None):
            raise NotImplementedError(f"Canopy's apply_chat_template does not offer {unsupported}")
    if return_tensors is not None:
        raise NotImplementedError("Canopy's apply_chat_template returns lists (return_tensors=None)")
    if tokenizer_kwargs:
        raise NotImplementedError("Canopy's apply_chat_template takes no tokenizer_kwargs")
    source = pick_template(templates, chat_template)
    batched = (isinstance(conversation, (list, tuple)) and conversation
               and isinstance(conversation[0], (list, tuple)))
    conversations = conversation if batched else [conversation]
    texts = [render(source, chat, special_tokens=tokenizer.special_tokens_map, **kwargs)
             for chat in conversations]
    if not tokenize:
        return texts if batched else texts[0]
    ids = [tokenizer.encode(text, add_special_tokens=False) for text in texts]
    if return_dict:
        masks = [[1] * len(row) for row in ids]
        return {"input_ids": ids if batched else ids[0],
                "attention_mask": masks if batched else masks[0]}
    return ids if batched else ids[0]
