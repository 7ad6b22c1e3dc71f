#!/usr/bin/env python3
"""Compares the module table of docs/architecture.md with the modules' real dependencies.

   tools/check-module-table.py BUILD_DIR     (the build writes BUILD_DIR/module-deps.txt)

Each row of the table's "depends on" column must name exactly the kvgate modules the module's
library links (other words, such as external libraries, are ignored). Exits 1 naming every row
that differs.
"""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
build = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else root / "build" / "release")
deps = {}
for line in (build / "module-deps.txt").read_text().splitlines():
    name, _, used = line.partition(":")
    deps[name.strip()] = set(used.split())
modules = set(deps)

doc = (root / "docs" / "architecture.md").read_text()
section = doc.split("## Modules", 1)[1].split("\n## ", 1)[0]
rows = {}
for line in section.splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) != 3 or not cells[0].startswith("`") or cells[2].startswith("not built"):
        continue
    for name in re.findall(r"`([a-z_]+)`", cells[0]):
        words = set(re.findall(r"[a-z_]+", cells[2]))
        rows[name] = words & modules

problems = []
for name in sorted(modules):
    if name not in rows:
        problems.append(f"{name}: no row in docs/architecture.md's module table")
    elif rows[name] != deps[name]:
        problems.append(f"{name}: the table says {sorted(rows[name])}, the build links "
                        f"{sorted(deps[name])}")
for name in sorted(set(rows) - modules):
    problems.append(f"{name}: in the table but not a module the build defines")
if problems:
    print("module table out of date:\n  " + "\n  ".join(problems))
    sys.exit(1)
print(f"module table: {len(modules)} modules match their CMake dependencies")
