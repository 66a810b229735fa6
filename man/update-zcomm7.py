#!/usr/bin/env python3
"""Refresh the generated parts of man/zcomm.7 from the source tree.

zcomm(7) copies two lists that other files own: the environment variables
of zc_env_table in src/common/env_table.c (name, default, help with the range,
choices and scope that zc_info -e prints too) and the pages in man/
for its SEE ALSO.  Run this after adding a variable or a page:

    python3 man/update-zcomm7.py

It rewrites only the text between the BEGIN/END comment markers.
"""
import os
import re
import sys

MAN = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(MAN)
PAGE = os.path.join(MAN, "zcomm.7")

C_STRING = r'"(?:[^"\\]|\\.)*"'
C_STRING_BODY = r'"((?:[^"\\]|\\.)*)"'
# {name, default, type, min, max, choices, flags, help...} (env.h, zc_env_spec_t)
ENTRY = re.compile(r"\{\s*(%s)\s*,\s*(NULL|%s)\s*,\s*(ZC_ENV_\w+)\s*,\s*([-\w]+)\s*,\s*([-\w]+)\s*,"
                   r"\s*(NULL|%s)\s*,\s*([\w\s|]+?)\s*,\s*((?:%s\s*)+)\}"
                   % (C_STRING, C_STRING, C_STRING, C_STRING))
LIMITS = {"INT32_MAX": 2**31 - 1, "INT64_MAX": 2**63 - 1}


def limit(token):
    return LIMITS[token] if token in LIMITS else int(token, 0)


def describe(kind, lo, hi, choices, flags):
    """The bracketed tail zc_env_describe() (env_table.c) adds to the help."""
    text = ""
    if kind == "ZC_ENV_INT":
        text += "range %d to %d; " % (limit(lo), limit(hi))
    elif kind == "ZC_ENV_CHOICE":
        text += "one of %s; " % ", ".join(choices.split("|"))
    if "ZC_ENV_SAME" in flags:
        text += "same value on every rank, checked at init; "
    if "ZC_ENV_COMM" in flags:
        text += "read once per communicator, at its creation"
    elif "ZC_ENV_PROCESS" in flags:
        text += "read once per process"
    elif "ZC_ENV_TOPO" in flags:
        text += "read by every zc_topo_load"
    else:
        text += "read at communicator creation"
    return text


def env_table():
    src = open(os.path.join(TOP, "src", "common", "env_table.c")).read()
    body = src[src.index("zc_env_table[] = {"):]
    body = body[:body.index("\n};")]
    for m in ENTRY.finditer(body):
        default = None if m.group(2) == "NULL" else m.group(2)[1:-1]
        choices = None if m.group(6) == "NULL" else m.group(6)[1:-1]
        help_text = "".join(re.findall(C_STRING_BODY, m.group(8)))
        help_text += " [%s]" % describe(m.group(3), m.group(4), m.group(5), choices, m.group(7))
        yield m.group(1)[1:-1], default, help_text


def troff(text):
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + text if text[:1] in ".'" else text


def env_lines():
    for name, default, help_text in env_table():
        yield ".TP"
        yield ".B %s" % name
        yield "default: %s." % (troff(default) if default is not None else "none")
        yield ".br"
        yield troff(help_text)


def see_also_lines():
    pages = [f for f in os.listdir(MAN) if re.match(r"[a-z_0-9-]+\.[137]$", f) and f != "zcomm.7"]
    pages.sort(key=lambda f: (f[-1] != "1", f[-1], f[:-2]))
    refs = [".BR %s (%s)" % (f[:-2], f[-1]) for f in pages]
    return [r + "," for r in refs[:-1]] + refs[-1:]


def replace(text, begin, end, lines):
    i = text.index(begin) + len(begin)
    j = text.index(end)
    return text[:i] + "".join(line + "\n" for line in lines) + text[j:]


def main():
    text = open(PAGE).read()
    text = replace(text, '.\\" BEGIN ENV TABLE (generated from src/common/env_table.c)\n',
                   '.\\" END ENV TABLE\n', list(env_lines()))
    text = replace(text, '.\\" BEGIN SEE ALSO (every page in man/)\n',
                   '.\\" END SEE ALSO\n', see_also_lines())
    open(PAGE, "w").write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
