#!/usr/bin/env python3
"""Reads one wrk run's output (with --latency) on stdin and prints "p50_ms p99_ms requests_per_s".

   tools/parse-wrk.py LEG_NAME < wrk-output.txt

A run that cannot be trusted (non-2xx answers, socket errors) or read (a missing figure, a unit
wrk did not print before) exits 1, saying which leg and what wrk printed.
"""
import re
import sys

name = sys.argv[1] if len(sys.argv) > 1 else "wrk"
out = sys.stdin.read()


def fail(why):
    sys.stderr.write(f"bench-proxy: the {name} leg: {why}; wrk printed:\n{out}\n")
    sys.exit(1)


def ms(v):
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", v)
    if not m:
        fail(f"cannot read the latency '{v}'")
    x, u = float(m.group(1)), m.group(2)
    return {"us": x / 1000, "ms": x, "s": x * 1000, "m": x * 60000}[u]


def find(pattern, what):
    m = re.search(pattern, out)
    if not m:
        fail(f"no {what} in the output")
    return m.group(1)


non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
if non2xx and int(non2xx.group(1)) > 0:
    fail(f"{non2xx.group(1)} answers were not 2xx")
errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
if errors and sum(map(int, errors.groups())) > 0:
    fail("socket errors")
# Anchored at a line's start: the "+/- Stdev" column ("78.99%") must not pass for a percentile.
p50 = ms(find(r"(?m)^\s*50%\s+(\S+)", "p50 latency"))
p99 = ms(find(r"(?m)^\s*99%\s+(\S+)", "p99 latency"))
rps = float(find(r"Requests/sec:\s+([\d.]+)", "request rate"))
print(f"{p50:.4f} {p99:.4f} {rps:.1f}")
