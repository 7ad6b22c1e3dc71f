#!/usr/bin/env python3
"""What the warm-up rule does for a worker that comes back empty in the middle of a replay.

Runs the same replay twice against a kvgate-mock fleet behind kvgate: once with the warm-up rule
at its defaults and once with it off (--warmup-thin-ratio 0). At --restart-at seconds worker 0's
engine is emptied and its publisher restarted (/admin/fault/restart_publisher with clear_cache),
as after an engine restart. Every second the gateway's /workers gives each worker's index blocks
(its memberships in the chain index). Reports, per mode: worker 0's blocks before the restart and
60 s after it (as a share of the fleet's mean), the seconds until it was back to half the fleet's
mean (the thinness ratio), the requests routed to it in that minute, and the replay's hit/oracle.

  tools/bench-warmup.py build/release [--rows 0:4000] [--speedup 3] [--restart-at 20]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from fleetlib import get_json, post, start_fleet, start_gateway, stop


def run_mode(a, warmup):
    mock, ports = start_fleet(a.build, a.workers, ["--speedup", str(a.engine_speedup)])
    urls = ["http://127.0.0.1:%d" % p for p in ports]
    gw, gw_port = start_gateway(a.build, urls, [] if warmup else ["--warmup-thin-ratio", "0"])
    out_dir = tempfile.mkdtemp(prefix="kvgate-bench-warmup-")
    try:
        replay_args = [os.path.join(a.build, "bin", "kvgate-replay"), "--target",
                       "http://127.0.0.1:%d" % gw_port, "--rows", a.rows, "--speedup",
                       str(a.speedup), "--block-tokens", str(a.block_tokens), "--out", out_dir,
                       "--no-progress"]
        if a.trace:
            replay_args += ["--trace", a.trace]
        replay = subprocess.Popen(replay_args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True)
        t0 = time.time()
        samples = []  # (t, [blocks per worker], requests of worker 0)
        restarted = False
        while replay.poll() is None and time.time() - t0 < a.restart_at + 75:
            t = time.time() - t0
            if not restarted and t >= a.restart_at:
                if post(ports[0], "/admin/fault/restart_publisher", {"clear_cache": True}) != 200:
                    sys.exit("bench-warmup: the mock refused the publisher restart")
                restarted = True
            view = {w["url"]: w for w in get_json(gw_port, "/workers")["workers"]}
            samples.append((t, [view[u]["index_blocks"] for u in urls], view[urls[0]]["requests"]))
            time.sleep(1)
        replay.terminate()
        replay.wait()
        summary = {}
        path = os.path.join(out_dir, "summary.json")
        if os.path.exists(path):
            with open(path) as f:
                summary = json.load(f)
    finally:
        stop(gw, mock)
    before = [s for s in samples if s[0] < a.restart_at]
    after = [s for s in samples if s[0] >= a.restart_at]
    if not before or not after:
        sys.exit("bench-warmup: the replay ended before the restart (more --rows?)")

    def share(s):
        mean = sum(s[1]) / len(s[1])
        return s[1][0] / mean if mean > 0 else 0

    back = next((s[0] - a.restart_at for s in after[2:] if share(s) >= 0.5), None)
    minute = [s for s in after if s[0] - a.restart_at <= 60]
    return {
        "mode": "warm-up on" if warmup else "warm-up off",
        "before": before[-1][1][0], "before_share": share(before[-1]),
        "after": minute[-1][1][0], "after_share": share(minute[-1]),
        "back_s": back, "requests": minute[-1][2] - after[0][2],
        "hit_oracle": summary.get("hit_over_oracle", summary.get("hit_oracle")),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", help="build directory (e.g. build/release)")
    ap.add_argument("--trace", help="Mooncake trace (default: the replay tool's default)")
    ap.add_argument("--rows", default="0:6000")
    ap.add_argument("--speedup", type=float, default=3)
    ap.add_argument("--block-tokens", type=int, default=64)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--engine-speedup", type=float, default=4)
    ap.add_argument("--restart-at", type=float, default=20)
    a = ap.parse_args()
    rows = [run_mode(a, w) for w in (True, False)]
    print("| mode | worker 0 blocks before | 60 s after (share of mean) | back to 0.5 of mean "
          "after | requests to it in that minute | hit/oracle |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        back = "%.0f s" % r["back_s"] if r["back_s"] is not None else "not within 60 s"
        ho = "%.3f" % r["hit_oracle"] if isinstance(r["hit_oracle"], (int, float)) else "-"
        print("| %s | %d (%.2f) | %d (%.2f) | %s | %d | %s |" % (
            r["mode"], r["before"], r["before_share"], r["after"], r["after_share"], back,
            r["requests"], ho))


if __name__ == "__main__":
    main()
