#!/usr/bin/env python3
"""Lists every function in src/ longer than the limit; exits 1 if one is not allowed below.

   tools/check-function-length.py [--limit N]

A function's length is its line range as universal-ctags reports it (first to last line,
both counted). A long function is a sign of several jobs in one; the allowlist holds only
what is long by nature and what is known and waiting to be split.
"""
import argparse
import pathlib
import subprocess
import sys

LIMIT = 150

# Functions that only declare command-line flags: one statement per flag reads best as one
# table, however long. None is past the limit today; one that grows past it belongs here.
FLAG_TABLES = set()

# Still to split: functions past the limit that are to become named steps (an entry leaves this
# list with the change that splits it). None today.
STILL_TO_SPLIT = set()

ALLOWED = FLAG_TABLES | STILL_TO_SPLIT


def functions(root):
    """Yields (path, name, first line, length) of every function ctags finds under src/."""
    out = subprocess.run(
        ["ctags", "--languages=C++", "--fields=+ne", "--kinds-C++=f", "-R", "-o", "-", "src"],
        cwd=root, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        cells = line.split("\t")
        fields = dict(c.split(":", 1) for c in cells[3:] if ":" in c)
        if "line" not in fields or "end" not in fields:
            continue
        first, last = int(fields["line"]), int(fields["end"])
        yield cells[1], cells[0], first, last - first + 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=LIMIT)
    args = parser.parse_args()
    root = pathlib.Path(__file__).resolve().parent.parent
    long = sorted((f for f in functions(root) if f[3] > args.limit), key=lambda f: -f[3])
    offenders = [f for f in long if (f[0], f[1]) not in ALLOWED]
    for path, name, first, length in long:
        mark = "allowed" if (path, name) in ALLOWED else "TOO LONG"
        print(f"{length:5} lines  {path}:{first}  {name}  ({mark})")
    # An entry whose function has been split or shortened is dead weight: say so.
    for path, name in sorted(ALLOWED - {(f[0], f[1]) for f in long}):
        print(f"note: {path} {name} is within {args.limit} lines now; drop it from the allowlist")
    if offenders:
        print(f"{len(offenders)} function(s) longer than {args.limit} lines: split them into "
              "named steps (tools/check-function-length.py)")
        return 1
    print(f"function length: none past {args.limit} lines but the allowed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
