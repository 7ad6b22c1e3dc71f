"""A worker for the Python tests that keeps every generation request it is sent.

RecordingWorker serves model "m" (GET /health and /v1/models, as an engine does) and answers
every POST with a one-choice completion, or with what its `answer_post` returns; it keeps each
POST's headers (names in lower case) and body, in order. Run it on a thread:

    worker = RecordingWorker()
    threading.Thread(target=worker.serve_forever, daemon=True).start()
    url = worker.url()
    ...
    worker.shutdown()

Also here: free_port() and wait_for(), which the tests that start kvgate share.
"""
import http.server
import json
import socket
import sys
import threading
import time


class RecordingWorker(http.server.ThreadingHTTPServer):
    daemon_threads = True

    # A POST's answer: (status, JSON document) for its (parsed body or None, headers).
    @staticmethod
    def answer_post(body, headers):
        return 200, {"id": "cmpl-1", "object": "text_completion", "model": "m",
                     "choices": [{"index": 0, "text": " ok", "finish_reason": "length"}],
                     "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}

    def __init__(self, answer_post=None):
        self.posts = []  # (headers, body bytes)
        self.lock = threading.Lock()
        if answer_post is not None:
            self.answer_post = answer_post
        super().__init__(("127.0.0.1", 0), _Handler)

    def url(self):
        return "http://127.0.0.1:%d" % self.server_address[1]

    def last_headers(self):
        with self.lock:
            return dict(self.posts[-1][0]) if self.posts else {}

    def take_bodies(self):
        """The bodies received since the last call, in order."""
        with self.lock:
            out, self.posts = [body for _headers, body in self.posts], []
        return out


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, doc):
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            self.answer(200, {})
        elif self.path == "/v1/models":
            self.answer(200, {"object": "list",
                              "data": [{"id": "m", "object": "model", "max_model_len": 4096}]})
        else:
            self.answer(404, {"error": {"message": "no such route"}})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        headers = {k.lower(): v for k, v in self.headers.items()}
        with self.server.lock:
            self.server.posts.append((headers, body))
        try:
            doc = json.loads(body) if body else {}
        except ValueError:
            doc = None
        self.answer(*self.server.answer_post(doc, headers))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, cond, seconds=30, test="test"):
    """Polls `cond` (an OSError counts as not yet) until it holds; exits failing after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if cond():
                return
        except OSError:
            pass
        time.sleep(0.05)
    sys.exit("%s: FAIL: %s" % (test, what))
