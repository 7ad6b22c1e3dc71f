#!/usr/bin/env python3
"""Request smuggling, differentially: the same raw bytes go to kvgate, to a strict reading of
RFC 9112 (strict_framing.py) and to nginx, each in front of a worker that records the requests it
is sent. For every case kvgate's worker must receive exactly the requests the strict reading
finds (both refuse, or both see the same requests), and where kvgate and nginx both accept they
must agree on every request: no request a proxy in front frames one way runs another way here.

Each case is one connection: a request whose framing is bent, followed by a second request (the
smuggled one) that runs only if a parser ends the first one early.

    python3 tests/app/smuggling_test.py BUILD_DIR
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import recording_worker  # noqa: E402
import strict_framing  # noqa: E402
from recording_worker import RecordingWorker, free_port  # noqa: E402


def prompt_of(body):
    """The prompt of a completion body, or what the body starts with when it is none."""
    try:
        doc = json.loads(body)
        if isinstance(doc, dict) and isinstance(doc.get("prompt"), str):
            return doc["prompt"]
    except ValueError:
        pass
    return "unparsed:" + body[:40].decode("latin-1")


def wait_for(what, cond):
    recording_worker.wait_for(what, cond, test="smuggling_test")


# Sent after every case: a server that reads the case whole answers it too and closes, one that
# refuses the case closes anyway, so an exchange ends on the server's close, never on a quiet
# spell.
PROBE = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def exchange(port, data):
    """Sends `data` on one connection and returns the answers' statuses, read until the server
    closes. (The sending side stays open: a client that ends it has left, as servers read it.)
    A server that does not close within 30 s framed `data` differently: the statuses so far."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(data)
        out = b""
        while True:
            try:
                piece = s.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not piece:
                break
            out += piece
    return statuses_in(out)


def statuses_in(out):
    """The statuses of the answers in `out`, each framed by its Content-Length."""
    statuses, at = [], 0
    while out.startswith(b"HTTP/1.1 ", at):
        end = out.find(b"\r\n\r\n", at)
        if end < 0:
            break
        head = out[at:end].decode("latin-1").split("\r\n")
        statuses.append(int(head[0][9:12]))
        length = 0
        for line in head[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        at = end + 4 + length
    return statuses


def request(prompt, fields=None, framing="length", version="HTTP/1.1", host=b"Host: x\r\n"):
    """A completion request for `prompt` whose body is framed by its length or chunked."""
    body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": 1}).encode()
    head = b"POST /v1/completions " + version.encode() + b"\r\n" + host
    head += b"Content-Type: application/json\r\n"
    if framing == "length":
        head += b"Content-Length: %d\r\n" % len(body)
    elif framing == "chunked":
        head += b"Transfer-Encoding: chunked\r\n"
        body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    return head + (fields or b"") + b"\r\n" + body


def cases():
    """(name, bytes): a bent first request, then the smuggled one."""
    inner = request("SMUGGLED")
    n = len(inner)
    front = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    chunk0 = b"0\r\n\r\n"
    out = [
        ("two plain requests", request("first") + inner),
        ("chunked, then a plain one", request("first", framing="chunked") + inner),
    ]
    # TE.CL / CL.TE: a length and a coding; the length covers "0\r\n\r\n" only.
    for coding in [b"chunked", b"xchunked", b"identity", b"gzip", b"", b"chunked, identity",
                   b" chunked", b"Chunked", b"chunked\x0b", b"\x0bchunked", b"chunked,chunked"]:
        out.append(("Content-Length 5 with Transfer-Encoding %r" % coding,
                    front + b"Content-Length: 5\r\nTransfer-Encoding: " + coding + b"\r\n\r\n" +
                    chunk0 + inner))
        out.append(("Transfer-Encoding %r then Content-Length 5" % coding,
                    front + b"Transfer-Encoding: " + coding + b"\r\nContent-Length: 5\r\n\r\n" +
                    chunk0 + inner))
    # TE.0: a coding and no length; a lenient parser reads no body and runs what follows.
    for coding in [b"xchunked", b"identity", b"gzip", b"", b"gzip, chunked", b"chunked, gzip",
                   b"deflate", b"chunked;ext=1", b"chunked, chunked", b"\"chunked\""]:
        out.append(("Transfer-Encoding %r alone" % coding,
                    front + b"Transfer-Encoding: " + coding + b"\r\n\r\n" + chunk0 + inner))
    # TE.TE: the field's name or line bent so one parser sees it and another does not.
    for line in [b"Transfer-Encoding : chunked", b" Transfer-Encoding: chunked",
                 b"Transfer-Encoding:\r\n chunked", b"Transfer-Encoding:\tchunked",
                 b"Transfer-Encoding\t: chunked", b"Transfer_Encoding: chunked",
                 b"Transfer-Encoding: chunked\r\nTransfer-Encoding: x",
                 b"Transfer-Encoding: x\r\nTransfer-Encoding: chunked",
                 b"Transfer-Encoding: gzip,\r\n\tchunked", b"X-Pad: a\r\n\tTransfer-Encoding: chunked",
                 b"Transfer-Encoding\x0b: chunked", b"TRANSFER-ENCODING: chunked"]:
        for length in [b"", b"Content-Length: %d\r\n" % (5 + n)]:
            out.append(("%r with %r" % (line, length),
                        front + line + b"\r\n" + length + b"\r\n" + chunk0 + inner))
    # Lengths repeated, listed or bent (CL.CL).
    for fields in [b"Content-Length: 5\r\nContent-Length: 5\r\n",
                   b"Content-Length: 5\r\nContent-Length: %d\r\n" % (5 + n),
                   b"Content-Length: 5, 5\r\n", b"Content-Length: +5\r\n",
                   b"Content-Length: 5 5\r\n", b"Content-Length: 0x5\r\n",
                   b"Content-Length:  5 \r\n", b"Content-Length: 05\r\n"]:
        out.append(("lengths %r" % fields, front + fields + b"\r\n" + chunk0 + inner))
    # Chunked bodies bent.
    for chunk in [b"5 \r\nhello\r\n0\r\n\r\n", b"+5\r\nhello\r\n0\r\n\r\n",
                  b"0x5\r\nhello\r\n0\r\n\r\n", b"5\nhello\r\n0\r\n\r\n",
                  b"5\r\nhello\n0\r\n\r\n", b"5\r\nhelloXX0\r\n\r\n",
                  b"ffffffffffffffffff\r\nhello\r\n0\r\n\r\n", b"5;ext=1\r\nhello\r\n0\r\n\r\n",
                  b"0\r\nTrailer: t\r\n\r\n", b"0\r\n\r"]:
        out.append(("chunks %r" % chunk,
                    front + b"Transfer-Encoding: chunked\r\n\r\n" + chunk + inner))
    # Host missing, repeated or bent; HTTP/1.0 with a coding; bare line ends in the head.
    out += [
        ("no Host", request("first", host=b"") + inner),
        ("two Hosts", request("first", host=b"Host: a\r\nHost: b\r\n") + inner),
        ("a Host with a space", request("first", host=b"Host: a b\r\n") + inner),
        ("HTTP/1.0 with chunked", front.replace(b"HTTP/1.1", b"HTTP/1.0") +
         b"Transfer-Encoding: chunked\r\n\r\n" + chunk0 + inner),
        ("a bare LF in the head", front + b"X-A: 1\nContent-Length: 5\r\n\r\n" + chunk0 + inner),
        ("a bare CR in the head", front + b"X-A: 1\rContent-Length: 5\r\n\r\n" + chunk0 + inner),
    ]
    return out


def prompts_taken(recorder):
    """The prompts of the requests the worker received since the last call."""
    return [prompt_of(body) for body in recorder.take_bodies()]


def prompts_of(requests):
    return [prompt_of(body) for _method, _target, body in requests]


def check_case(name, data, port, nginx_port, recorder):
    """What is wrong with kvgate's (and nginx's) reading of `data`: kvgate's worker gets exactly
    the completions the strict reading frames, kvgate answers each framed request and refuses
    where the strict reading refuses; nginx, where it accepts, frames as the strict reading does
    (which checks the reference against a parser the world relies on)."""
    data += PROBE
    framed, refusal = strict_framing.frame(data)
    if refusal is not None and refusal.startswith("an unfinished"):
        return ["%s: a case must end with a whole request or a refusal" % name]
    expected = prompts_of(framed)
    valid = [p for p in expected if not p.startswith("unparsed:")]
    statuses = exchange(port, data)
    seen = prompts_taken(recorder)
    failures = []
    if seen != valid:
        failures.append("%s: kvgate's worker got %s, the strict reading frames %s (%s)"
                        % (name, seen, expected, refusal or "all read"))
    want = len(framed) + (1 if refusal else 0)
    if len(statuses) != want or (refusal and statuses[-1] not in (400, 501)):
        failures.append("%s: kvgate answered %s, the strict reading frames %d request(s) (%s)"
                        % (name, statuses, len(framed), refusal or "all read"))
    if nginx_port is not None:
        exchange(nginx_port, data)
        by_nginx = prompts_taken(recorder)
        common = min(len(by_nginx), len(expected))
        if by_nginx[:common] != expected[:common]:
            failures.append("%s: nginx framed %s, the strict reading %s"
                            % (name, by_nginx, expected))
    return failures


def start_nginx(work, port, upstream):
    if shutil.which("nginx") is None:
        return None
    conf = os.path.join(work, "nginx.conf")
    for d in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        os.makedirs(os.path.join(work, d), exist_ok=True)
    with open(conf, "w") as f:
        f.write(f"""daemon off;
master_process off;
pid {work}/nginx.pid;
error_log {work}/nginx.err warn;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {work}/client_body;
  proxy_temp_path {work}/proxy;
  fastcgi_temp_path {work}/fastcgi;
  uwsgi_temp_path {work}/uwsgi;
  scgi_temp_path {work}/scgi;
  server {{
    listen 127.0.0.1:{port};
    location / {{ proxy_pass http://127.0.0.1:{upstream}; proxy_http_version 1.1; }}
  }}
}}
""")
    proc = subprocess.Popen(["nginx", "-p", work, "-c", conf], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wait_for("nginx did not listen", lambda: socket.create_connection(("127.0.0.1", port)).close()
             is None)
    return proc


def main():
    build = sys.argv[1]
    kvgate_bin = os.path.join(build, "bin", "kvgate")
    work = tempfile.mkdtemp(prefix="smuggling_test.")
    procs = []
    recorder = RecordingWorker()
    threading.Thread(target=recorder.serve_forever, daemon=True).start()
    rec_url = "http://127.0.0.1:%d" % recorder.server_address[1]
    try:
        port = free_port()
        log = open(os.path.join(work, "kvgate.log"), "w")
        procs.append(subprocess.Popen(
            [kvgate_bin, "--host", "127.0.0.1", "--port", str(port), "--worker-urls", rec_url,
             "--no-kv-events", "--health-check-interval-secs", "0.2", "--log-level", "warn"],
            stdout=log, stderr=subprocess.STDOUT))

        def routable():
            with urllib.request.urlopen("http://127.0.0.1:%d/workers" % port, timeout=2) as r:
                return b'"routable":true' in r.read()
        wait_for("kvgate did not route to the recorder", routable)
        nginx_port = free_port()
        nginx = start_nginx(work, nginx_port, recorder.server_address[1])
        if nginx is not None:
            procs.append(nginx)
        else:
            print("smuggling_test: nginx is missing; comparing with the strict reading only")
        prompts_taken(recorder)
        failures = []
        for name, data in cases():
            failures += check_case(name, data, port, nginx_port if nginx else None, recorder)
        print("smuggling_test: %d cases" % len(cases()))
        if failures:
            sys.exit("smuggling_test: FAIL:\n  " + "\n  ".join(failures))
        print("smuggling_test: pass")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        recorder.shutdown()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
