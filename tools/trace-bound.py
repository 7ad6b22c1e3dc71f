#!/usr/bin/env python3
"""What any router could reach on a Mooncake trace slice: an upper bound on goodput.

  tools/trace-bound.py TRACE [--rows 0:700] [--speedup 2] [--prefill-tokens-per-s 20000]
                       [--slo-ttft-ms 2000] [--step-ms 6] [--baseline-goodput 4.38]

The ideal router sends every request where every block any earlier request computed is cached
(an infinite cache on one worker), and no request ever queues or shares a step. A request is
then within the TTFT SLO when its uncached tokens alone prefill in time, and the replay cannot
end before the last request's arrival, prefill and output (one token a step, each step at least
--step-ms). Goodput as kvgate-replay counts it (requests within the SLO over the replay's wall
time) is at most the first over the second. The defaults are kvgate-mock's 8B model (20,000 prompt
tokens/s, a 6 ms step) and kvgate-replay's SLO.
"""
import argparse
import json
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("--rows", default="0:700", help="A:B, the rows kvgate-replay --rows takes")
    p.add_argument("--speedup", type=float, default=2.0, help="arrival times divided by this")
    p.add_argument("--prefill-tokens-per-s", type=float, default=20000.0)
    p.add_argument("--slo-ttft-ms", type=float, default=2000.0)
    p.add_argument("--step-ms", type=float, default=6.0, help="the shortest decode step")
    p.add_argument("--block-tokens", type=int, default=512, help="tokens per trace hash id")
    p.add_argument("--baseline-goodput", type=float, help="req/s to give the bound as a ratio of")
    a = p.parse_args()
    first, last = (int(x) for x in a.rows.split(":"))
    with open(a.trace) as f:
        rows = [json.loads(line) for line in f][first:last]
    if not rows:
        sys.exit("trace-bound: no rows in " + a.rows)
    seen = set()  # every prefix (as a tuple of hash ids) some earlier request computed
    within = 0
    end_s = 0.0
    for r in rows:
        ids = r["hash_ids"]
        held = 0
        while held < len(ids) and tuple(ids[: held + 1]) in seen:
            held += 1
        for i in range(len(ids)):
            seen.add(tuple(ids[: i + 1]))
        uncached = max(1, r["input_length"] - held * a.block_tokens)
        ttft_s = uncached / a.prefill_tokens_per_s
        within += ttft_s * 1e3 <= a.slo_ttft_ms
        arrival_s = r["timestamp"] / 1e3 / a.speedup
        end_s = max(end_s, arrival_s + ttft_s + r["output_length"] * a.step_ms / 1e3)
    bound = within / end_s
    print(f"rows {a.rows} at {a.speedup:g}x: {len(rows)} requests, {within} "
          f"({within / len(rows):.3f}) can be within the {a.slo_ttft_ms:g} ms TTFT SLO, "
          f"the replay lasts at least {end_s:.1f} s")
    line = f"goodput at most {bound:.2f} req/s"
    if a.baseline_goodput:
        line += f" = {bound / a.baseline_goodput:.3f}x {a.baseline_goodput:g} req/s"
    print(line)


if __name__ == "__main__":
    main()
