"""Shared by the benchmark scripts in tools/: start a kvgate-mock fleet and kvgate on loopback,
talk JSON to them, stop them. Standard library only."""
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import time


def get_json(port, path, key=None):
    """GETs `path` (with `key` as a Bearer token when given) and parses the answer."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        c.request("GET", path, headers={"Authorization": "Bearer " + key} if key else {})
        return json.loads(c.getresponse().read())
    finally:
        c.close()


def post(port, path, body):
    """POSTs `body` as JSON; returns the status."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        return c.getresponse().status
    finally:
        c.close()


def _start(args, ready_text, timeout=20):
    errors = tempfile.TemporaryFile()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=errors, text=True)
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        if ready_text in line:
            return p, line
    p.kill()
    errors.seek(0)
    sys.exit("%s did not start: %s" % (args[0], errors.read().decode()[-2000:]))


def start_fleet(build, workers, extra_args=()):
    """kvgate-mock with `workers` workers on free ports: (process, [http port per worker])."""
    port_file = tempfile.mktemp(prefix="kvgate-bench-ports-")
    proc, _ = _start([os.path.join(build, "bin", "kvgate-mock"), "--workers", str(workers),
                      "--http-port", "0", "--kv-port", "0", "--port-file", port_file,
                      "--log-level", "warn"] + list(extra_args), "kvgate-mock ready")
    with open(port_file) as f:
        ports = [w["http_port"] for w in json.load(f)["workers"]]
    os.unlink(port_file)
    return proc, ports


def start_gateway(build, worker_urls, extra_args=(), key=None):
    """kvgate on a free loopback port, every worker routable: (process, port). `key`: a client
    key it takes (with --api-key or --api-keys-file)."""
    proc, line = _start([os.path.join(build, "bin", "kvgate"), "--host", "127.0.0.1", "--port",
                         "0", "--log-level", "warn", "--expose-worker-header"] + list(extra_args) +
                        ["--worker-urls"] + list(worker_urls), "kvgate listening on")
    port = int(re.search(r":(\d+)", line.split("listening on", 1)[1]).group(1))
    deadline = time.time() + 20
    while time.time() < deadline:
        if all(w["routable"] for w in get_json(port, "/workers", key)["workers"]):
            break
        time.sleep(0.05)
    return proc, port


def stop(*procs):
    for p in procs:
        p.kill()
        p.wait()
