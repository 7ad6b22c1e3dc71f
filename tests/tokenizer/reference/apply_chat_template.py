#!/usr/bin/python3
"""Renders chat requests as Hugging Face transformers' apply_chat_template renders them, with
Python's own jinja2 in the environment transformers builds for chat templates.

    apply_chat_template.py MODEL_FOLDER IN.jsonl OUT.jsonl

MODEL_FOLDER holds tokenizer_config.json (its chat_template and special tokens), or a
chat_template.jinja that replaces the config's template. Each input line is
{"messages": [...], "tools": [...] or null, "add_generation_prompt": bool,
 "continue_final_message": bool, "kwargs": {...}}; each output line is {"ok": true, "text": ...}
or {"ok": false, "error": ...}.
"""
import json
import os
import sys
from datetime import datetime

from jinja2 import nodes
from jinja2.exceptions import TemplateError
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class AssistantTracker(Extension):
    # {% generation %}...{% endgeneration %}: renders its body (transformers uses it to find the
    # assistant's tokens).
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def token_text(t):
    return t["content"] if isinstance(t, dict) else t


def load(folder):
    with open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    special = {}
    for name in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                 "mask_token"):
        if config.get(name) is not None:
            special[name] = token_text(config[name])
    if config.get("additional_special_tokens"):
        special["additional_special_tokens"] = [token_text(t) for t in
                                                config["additional_special_tokens"]]
    templates = {}
    jinja_file = os.path.join(folder, "chat_template.jinja")
    if os.path.exists(jinja_file):
        with open(jinja_file, encoding="utf-8") as f:
            templates["default"] = f.read()
    elif isinstance(config.get("chat_template"), list):
        templates = {t["name"]: t["template"] for t in config["chat_template"]}
    else:
        templates["default"] = config["chat_template"]
    env = environment()
    return special, {name: env.from_string(source) for name, source in templates.items()}


def render(special, templates, case):
    tools = case.get("tools")
    template = templates["tool_use"] if tools and "tool_use" in templates else templates["default"]
    kwargs = {**special, **case.get("kwargs", {})}
    for fixed in ("messages", "tools", "documents", "add_generation_prompt",
                  "continue_final_message"):
        kwargs.pop(fixed, None)
    messages = case["messages"]
    continue_final = case.get("continue_final_message", False)
    text = template.render(messages=messages, tools=tools, documents=None,
                           add_generation_prompt=case.get("add_generation_prompt", True),
                           continue_final_message=continue_final, **kwargs)
    if continue_final:
        final = messages[-1]["content"]
        if isinstance(final, (list, tuple)):
            for block in reversed(final):
                if "text" in block:
                    final = block["text"]
                    break
            else:
                raise ValueError("continue_final_message is set but the final message has no "
                                 "text to continue")
        if final.strip() not in text:
            raise ValueError("continue_final_message is set but the final message does not "
                             "appear in the chat after applying the chat template")
        at = text.rindex(final.strip())
        if text[at:at + len(final.lstrip())] == final:
            text = text[:at + len(final.lstrip())]
        else:
            text = text[:at + len(final.strip())]
    return text


def main():
    folder, src, dst = sys.argv[1:4]
    special, templates = load(folder)
    with open(src, encoding="utf-8") as fin, open(dst, "w", encoding="utf-8") as fout:
        for line in fin:
            case = json.loads(line)
            try:
                out = {"ok": True, "text": render(special, templates, case)}
            except Exception as e:  # noqa: BLE001 - every failure is an answer to compare
                out = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            fout.write(json.dumps(out, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
