#!/usr/bin/env python3
"""The reference for kvgate's jinja module: Python's jinja2 configured as Hugging Face transformers
configures it for chat templates (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, the
{% generation %} tag, loop controls, its own tojson, raise_exception and strftime_now).

   render.py CASES_JSONL OUT_JSONL

Each input line is {"template": "...", "context": {...}}; each output line is {"ok": true,
"text": "..."} or {"ok": false, "error": "..."} (a syntax error or any error while rendering).
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


class AssistantTracker(Extension):
    """transformers' {% generation %}...{% endgeneration %}: renders its body (the tracking of
    assistant spans is not part of the text)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(
            lineno)

    def _generation_support(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def make_environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    cases_path, out_path = sys.argv[1], sys.argv[2]
    env = make_environment()
    compiled = {}
    with open(cases_path, encoding="utf-8") as cases, open(out_path, "w", encoding="utf-8") as out:
        for line in cases:
            if not line.strip():
                continue
            case = json.loads(line)
            try:
                source = case["template"]
                if source not in compiled:
                    compiled[source] = env.from_string(source)
                text = compiled[source].render(**case["context"])
                result = {"ok": True, "text": text}
            except Exception as e:  # the reference only says whether it failed, and why
                result = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            out.write(json.dumps(result, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
