#!/usr/bin/env python3
"""How fresh and how right is the gateway's picture of each worker's load, pushed vs polled?

Starts a kvgate-mock fleet and kvgate on loopback, drives streamed completions of mixed lengths
from a fixed number of clients, and every 20 ms reads both the gateway's view (GET /workers:
`running`, `load_age_ms`) and the engines' truth (each mock worker's GET /load). Reports, per
mode, the age of the figure the gateway routes on and the error of its running-requests gauge
against the engine's own count at that moment. Modes: `polled` (the gateway polls /load every
--load-poll-interval-secs, 0.5 s by default) and `pushed` (kvgate-mock --push-loads: the load
rides on the KV-event socket after every step and every 250 ms while quiet).

  tools/bench-load-freshness.py build/release [--seconds 15] [--clients 24] [--workers 2]
"""
import argparse
import http.client
import json
import random
import statistics
import threading
import time

from fleetlib import get_json, start_fleet, start_gateway, stop


def client_loop(port, stop, seed):
    rng = random.Random(seed)
    conn = None
    while not stop.is_set():
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            body = json.dumps({"model": "mock-8b", "stream": True,
                               "max_tokens": rng.choice([8, 32, 128, 256]),
                               "prompt": "client %d asks %d: %s" % (seed, rng.randrange(1 << 30),
                                                                   " ".join(["w"] * rng.randrange(20, 400)))})
            conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
        except Exception:  # the gateway's answer is not what this measures
            conn = None
            time.sleep(0.05)


def run_mode(build, mode, seconds, clients, workers):
    mock, ports = start_fleet(build, workers, ["--push-loads"] if mode == "pushed" else [])
    urls = ["http://127.0.0.1:%d" % p for p in ports]
    gw, gw_port = start_gateway(build, urls)
    try:
        done = threading.Event()
        threads = [threading.Thread(target=client_loop, args=(gw_port, done, i), daemon=True)
                   for i in range(clients)]
        for t in threads:
            t.start()
        time.sleep(2)  # past the ramp
        ages, errors, truths = [], [], []
        sources = {}
        end = time.time() + seconds
        while time.time() < end:
            view = {w["url"]: w for w in get_json(gw_port, "/workers")["workers"]}
            for url, port in zip(urls, ports):
                truth = get_json(port, "/load")["running"]
                w = view[url]
                ages.append(w["load_age_ms"])
                errors.append(abs(w["running"] - truth))
                truths.append(truth)
                sources[w["load_source"]] = sources.get(w["load_source"], 0) + 1
            time.sleep(0.02)
        done.set()
        for t in threads:
            t.join(timeout=70)
    finally:
        stop(gw, mock)
    q = statistics.quantiles
    return {
        "mode": mode, "samples": len(ages), "sources": sources,
        "age_p50": statistics.median(ages), "age_p90": q(ages, n=10)[-1],
        "err_mean": statistics.mean(errors), "err_p90": q(errors, n=10)[-1],
        "running_mean": statistics.mean(truths),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", help="build directory (e.g. build/release)")
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--clients", type=int, default=24)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    rows = [run_mode(a.build, m, a.seconds, a.clients, a.workers) for m in ("polled", "pushed")]
    print("| load source | samples | age p50 (ms) | age p90 (ms) | running error mean | "
          "running error p90 | engine running mean |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %d | %.0f | %.0f | %.2f | %.1f | %.1f |" % (
            r["mode"], r["samples"], r["age_p50"], r["age_p90"], r["err_mean"], r["err_p90"],
            r["running_mean"]))
    for r in rows:
        print("%s: /workers load_source counts %s" % (r["mode"], r["sources"]))


if __name__ == "__main__":
    main()
