#!/usr/bin/env python3
"""The conventions an operator's tools rely on, checked with raw HTTP against the kvgate binary in
front of a worker that records what it is sent:

- HEAD answers as GET without the body (RFC 9110 9.3.2); a 405 says what is Allowed;
- every answer carries x-request-id, the client's own when it sent one, and the worker gets it;
- a route's path with a trailing slash is that route;
- an error kvgate made says so (x-kvgate-error-source: gateway), and a worker's own error, which
  can read exactly alike, says it is the worker's;
- answers name their worker only when the decision is asked for;
- the client's key stays with kvgate; the headers --forward-headers names reach the worker;
- every --access-log json line matches tests/app/fixtures/access_log.schema.json, times with at
  most three decimals, generation lines with their tokens.

    python3 tests/app/conformance_test.py BUILD_DIR
"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading

import jsonschema

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import recording_worker  # noqa: E402
from recording_worker import RecordingWorker, free_port  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
KEY = "sk-conformance"
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("conformance_test: FAIL: " + what, flush=True)


def answer_post(body, headers):
    """A prompt of "missing" gets the worker's own 404, worded as kvgate words its own."""
    if body and body.get("prompt") == "missing":
        return 404, {"error": {"message": "The model 'm' does not exist",
                               "type": "not_found_error", "param": None, "code": 404}}
    return RecordingWorker.answer_post(body, headers)


def raw(port, method, path, headers=(), body=b""):
    """One request on its own connection: (status, {header: value}, body bytes). The head is
    read to its end and the body by its Content-Length, so a HEAD's empty body shows."""
    lines = [f"{method} {path} HTTP/1.1", "Host: gw", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in headers]
    if body:
        lines.append(f"Content-Length: {len(body)}")
    data = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(data)
        out = b""
        while True:
            piece = s.recv(65536)
            if not piece:
                break
            out += piece
    head, _, rest = out.partition(b"\r\n\r\n")
    status_line, *fields = head.decode("latin-1").split("\r\n")
    got = {}
    for f in fields:
        name, _, value = f.partition(":")
        got.setdefault(name.strip().lower(), value.strip())
    return int(status_line[9:12]), got, rest


def completion(prompt, model="m"):
    return json.dumps({"model": model, "prompt": prompt, "max_tokens": 2}).encode()


def wait_for(what, cond):
    recording_worker.wait_for(what, cond, test="conformance_test")


def check_head_and_allow(port):
    for path in ["/health", "/readiness", "/metrics"]:
        status, h, body = raw(port, "HEAD", path, [("Authorization", f"Bearer {KEY}")])
        check(status == 200, f"HEAD {path}: {status}")
        check(int(h.get("content-length", "0")) > 0 and body == b"",
              f"HEAD {path}: the GET's length, no body ({h.get('content-length')}, {len(body)})")
        check(h.get("x-request-id"), f"HEAD {path}: x-request-id")
    status, h, _ = raw(port, "DELETE", "/health")
    check(status == 405, f"DELETE /health: {status}")
    allow = {m.strip() for m in h.get("allow", "").split(",")}
    check({"GET", "HEAD"} <= allow, f"405 Allow: {h.get('allow')}")


def check_request_ids(port):
    auth = [("Authorization", f"Bearer {KEY}")]
    for method, path, headers, want in [
            ("GET", "/v1/models", (), 401), ("GET", "/no/such/route", auth, 404),
            ("PUT", "/v1/models", auth, 405), ("GET", "/health", (), 200),
            ("GET", "/v1/models", auth, 200), ("GET", "/workers", auth, 200),
            ("GET", "/metrics", auth, 200)]:
        status, h, _ = raw(port, method, path, headers)
        check(status == want, f"{method} {path}: {status}, not {want}")
        check(re.fullmatch(r"[\x21-\x7e]{1,128}", h.get("x-request-id", "")),
              f"{method} {path}: x-request-id {h.get('x-request-id')!r}")
        if status >= 400:
            check(h.get("x-kvgate-error-source") == "gateway",
                  f"{method} {path}: its own error says so ({h.get('x-kvgate-error-source')})")
    status, h, _ = raw(port, "GET", "/health", [("X-Request-Id", "client-id-7")])
    check(h.get("x-request-id") == "client-id-7", f"the client's id kept: {h.get('x-request-id')}")


def check_trailing_slash(port):
    auth = ("Authorization", f"Bearer {KEY}")
    status, _, body = raw(port, "GET", "/v1/models/", [auth])
    check(status == 200 and b'"m"' in body, f"/v1/models/: {status} {body[:80]!r}")
    status, _, body = raw(port, "POST", "/v1/completions/",
                          [auth, ("Content-Type", "application/json")], completion("slash"))
    check(status == 200, f"/v1/completions/: {status} {body[:120]!r}")


def check_error_sources(port):
    auth = ("Authorization", f"Bearer {KEY}")
    ctype = ("Content-Type", "application/json")
    status, h, body = raw(port, "POST", "/v1/completions", [auth, ctype],
                          completion("x", model="nope"))
    check(status == 404 and b"does not exist" in body, f"unknown model: {status} {body[:80]!r}")
    check(h.get("x-kvgate-error-source") == "gateway", f"kvgate's 404: {h}")
    status, h, body = raw(port, "POST", "/v1/completions", [auth, ctype], completion("missing"))
    check(status == 404 and b"does not exist" in body, f"worker's 404: {status} {body[:80]!r}")
    check(h.get("x-kvgate-error-source") == "worker", f"the worker's 404 says so: {h}")


def check_worker_header_and_forwarding(port, worker):
    auth = ("Authorization", f"Bearer {KEY}")
    ctype = ("Content-Type", "application/json")
    sent = [auth, ctype, ("X-Trace-Id", "trace-1"), ("OpenAI-Organization", "org-1"),
            ("X-Request-Id", "rid-42"), ("X-Other", "kept-here")]
    status, h, _ = raw(port, "POST", "/v1/completions", sent, completion("plain"))
    check(status == 200 and "x-kvgate-worker" not in h, f"no worker named unasked: {h}")
    check("x-kvgate-error-source" not in h, "no error source on a success")
    got = worker.last_headers()
    check(got.get("x-trace-id") == "trace-1", f"x-trace-id forwarded: {got}")
    check(got.get("openai-organization") == "org-1", f"openai-organization forwarded: {got}")
    check(got.get("x-request-id") == "rid-42", f"the request id reaches the worker: {got}")
    check("x-other" not in got, "a header not listed stays")
    check(KEY not in got.get("authorization", ""), "the client's key stays with kvgate")
    status, h, _ = raw(port, "POST", "/v1/completions", sent + [("X-Kvgate-Explain", "1")],
                       completion("explained"))
    check(status == 200 and h.get("x-kvgate-worker", "").startswith("http://127.0.0.1:"),
          f"the worker named when the decision is asked: {h}")


def check_access_log(path):
    with open(os.path.join(HERE, "fixtures", "access_log.schema.json")) as f:
        schema = json.load(f)
    validator = jsonschema.Draft202012Validator(schema)
    with open(path) as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    # stdout also has the ready lines scripts wait for. They are printed once the listeners are
    # open, so a request answered at once (the readiness poll) can be logged before them.
    ready = [line for line in lines if re.match(r"kvgate (gRPC )?listening on ", line)]
    check(len(ready) == 1, f"one ready line on stdout: {ready}")
    lines = [line for line in lines if line not in ready]
    check(len(lines) >= 15, f"access log lines: {len(lines)}")
    generations = 0
    for line in lines:
        doc = json.loads(line)
        for e in validator.iter_errors(doc):
            check(False, f"access log line {line}: {e.message}")
        for field in ["duration_ms", "decision_us", "ttft_ms"]:
            m = re.search(r'"%s":(-?[0-9.eE+-]+)' % field, line)
            check(m is None or re.fullmatch(r"[0-9]+(\.[0-9]{1,3})?", m.group(1)),
                  f"{field} with at most three decimals: {line}")
        if doc["path"].startswith("/v1/completions") and doc["status"] == 200:
            generations += 1
            check(doc.get("prompt_tokens", 0) > 0 and doc.get("completion_tokens") == 2,
                  f"a generation's tokens: {line}")
            check(doc.get("model") == "m" and doc.get("worker"), f"a generation's model: {line}")
    check(generations >= 3, f"generation lines: {generations}")
    ids = [json.loads(line)["request_id"] for line in lines]
    check("rid-42" in ids and "client-id-7" in ids, "the clients' ids logged")


def main():
    build = sys.argv[1]
    worker = RecordingWorker(answer_post)
    threading.Thread(target=worker.serve_forever, daemon=True).start()
    port, work = free_port(), tempfile.mkdtemp(prefix="kvgate-conformance-")
    log_path = os.path.join(work, "access.log")
    with open(log_path, "w") as out, open(os.path.join(work, "gateway.err"), "w") as err:
        gw = subprocess.Popen(
            [os.path.join(build, "bin", "kvgate"), "--host", "127.0.0.1", "--port", str(port),
             "--worker-urls", worker.url(),
             "--policy", "round_robin", "--access-log", "json", "--api-key", KEY,
             "--forward-headers", "traceparent", "x-trace-id", "openai-organization",
             "--health-check-interval-secs", "0.2"],
            stdout=out, stderr=err)
    try:
        wait_for("kvgate ready", lambda: raw(port, "GET", "/readiness")[0] == 200)
        check_head_and_allow(port)
        check_request_ids(port)
        check_trailing_slash(port)
        check_error_sources(port)
        check_worker_header_and_forwarding(port, worker)
    finally:
        gw.terminate()
        gw.wait(timeout=30)
        worker.shutdown()
    check_access_log(log_path)
    if FAILURES:
        with open(os.path.join(work, "gateway.err")) as f:
            print(f.read()[-3000:])
        sys.exit(f"conformance_test: {len(FAILURES)} failure(s)")
    print("conformance_test: every check passed")


if __name__ == "__main__":
    main()
