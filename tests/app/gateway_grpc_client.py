#!/usr/bin/python3
"""A client of kvgate's gRPC front end written against the proto alone, with Debian's
python3-grpcio (not kvgate's C++ code), beside plain HTTP to the same gateway:

- the API key: refused without it (UNAUTHENTICATED), served with it;
- streamed Generate: one chunk per token with its id and text, then Complete with the finish
  reason, usage and the worker; unstreamed: Complete alone with every token;
- text and chat input; the same routing as HTTP: a prompt (or a conversation) sent one way then
  the other lands on the same worker with its prefix cached; repeats stay put;
- cancellation mid-stream and an expired deadline: the client sees CANCELLED and
  DEADLINE_EXCEEDED, and the worker's own request record says "aborted";
- bad input is INVALID_ARGUMENT; ListModels and ListWorkers; health SERVING; reflection lists
  the services.

  gateway_grpc_client.py GENERATED_DIR GRPC_ADDR HTTP_URL API_KEY WORKER_URL...
GENERATED_DIR holds kvgate/v1/gateway_pb2.py (protoc --python_out)."""
import json
import sys
import time
import urllib.request

sys.path.insert(0, sys.argv[1])
import grpc  # noqa: E402
from kvgate.v1 import gateway_pb2 as pb  # noqa: E402

addr, http_url, key, worker_urls = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
channel = grpc.insecure_channel(addr)
P = "/kvgate.v1.Gateway/"
generate = channel.unary_stream(P + "Generate", pb.GenerateRequest.SerializeToString,
                                pb.GenerateResponse.FromString)
list_models = channel.unary_unary(P + "ListModels", pb.ListModelsRequest.SerializeToString,
                                  pb.ListModelsResponse.FromString)
list_workers = channel.unary_unary(P + "ListWorkers", pb.ListWorkersRequest.SerializeToString,
                                   pb.ListWorkersResponse.FromString)
auth = [("authorization", "Bearer " + key)]
problems = []


def check(ok, what):
    if not ok:
        problems.append(what)


def code_of(call):
    try:
        for _ in call():
            pass
    except grpc.RpcError as e:
        return e.code()
    return grpc.StatusCode.OK


def prompt(tag, n=96):
    """n token ids no other prompt of this run shares (96: 6 blocks of 16)."""
    return [1000 + (tag * 131 + i * 7) % 30000 for i in range(n)]


def over_grpc(ids, **kw):
    req = pb.GenerateRequest(token_ids=pb.TokenIds(ids=ids), max_tokens=kw.pop("max_tokens", 4),
                             **kw)
    return list(generate(req, metadata=auth, timeout=20))


def over_http(ids):
    body = json.dumps({"model": "mock-8b", "prompt": ids, "max_tokens": 4}).encode()
    req = urllib.request.Request(http_url + "/v1/completions", body, {
        "content-type": "application/json", "authorization": "Bearer " + key})
    with urllib.request.urlopen(req, timeout=20) as r:
        answer = json.load(r)
        return r.headers["x-kvgate-worker"], answer["usage"]["prompt_tokens_details"]["cached_tokens"]


def worker_records(url):
    with urllib.request.urlopen(url + "/admin/requests", timeout=10) as r:
        return json.load(r)["requests"]


# The API key, as on HTTP.
req = pb.GenerateRequest(token_ids=pb.TokenIds(ids=prompt(0)), max_tokens=2)
check(code_of(lambda: generate(req, timeout=10)) == grpc.StatusCode.UNAUTHENTICATED,
      "no key: UNAUTHENTICATED")
check(code_of(lambda: generate(req, metadata=[("authorization", "Bearer wrong")], timeout=10))
      == grpc.StatusCode.UNAUTHENTICATED, "a wrong key: UNAUTHENTICATED")

# Streamed: a chunk per token, then Complete.
msgs = over_grpc(prompt(1), max_tokens=8, stream=True, return_text=True)
chunks = [m.chunk for m in msgs if m.WhichOneof("kind") == "chunk"]
done = [m.complete for m in msgs if m.WhichOneof("kind") == "complete"]
check(len(done) == 1 and msgs[-1].WhichOneof("kind") == "complete", f"one Complete, last: {msgs}")
check(sum(len(c.token_ids) for c in chunks) == 8, f"8 token ids over the chunks: {chunks}")
check(all(c.text for c in chunks), "every chunk carries its text (return_text)")
if done:
    c = done[0]
    check(c.finish_reason == "length", f"finish_reason: {c.finish_reason}")
    check(c.usage.prompt_tokens == 96 and c.usage.completion_tokens == 8, f"usage: {c.usage}")
    check(c.worker in worker_urls, f"worker {c.worker} is one of {worker_urls}")
    check(len(c.request_id) > 0, "a request id")
# Not streamed: Complete alone, every token in it.
msgs = over_grpc(prompt(2), max_tokens=5)
check(len(msgs) == 1 and len(msgs[0].complete.token_ids) == 5, f"unstreamed: {msgs}")

# The same routing as HTTP, both ways, and repeats stay on the holder.
same = 0
for i in range(3, 9):
    ids = prompt(i)
    if i % 2:
        h_worker, _ = over_http(ids)
        time.sleep(0.3)  # its blocks reach the index through the worker's KV events
        c = over_grpc(ids)[-1].complete
        g_worker, cached = c.worker, c.usage.cached_tokens
    else:
        c = over_grpc(ids)[-1].complete
        time.sleep(0.3)
        h_worker, cached = over_http(ids)
        g_worker = c.worker
    same += h_worker == g_worker
    check(h_worker == g_worker, f"prompt {i}: HTTP on {h_worker}, gRPC on {g_worker}")
    check(cached >= 80, f"prompt {i}: the second front end found {cached} of 96 tokens cached")
# Text, tokenized by the gateway as HTTP's prompts are.
c = list(generate(pb.GenerateRequest(text="a plain text prompt " * 20, max_tokens=3),
                  metadata=auth, timeout=20))[-1].complete
check(c.usage.prompt_tokens > 20 and len(c.token_ids) == 3, f"text over gRPC: {c}")
# A conversation: rendered as a chat completion both ways, it lands where its prefix is.
talk = [pb.ChatMessage(role="system", content="You answer in haiku. " * 12),
        pb.ChatMessage(role="user", content="Tell me about prefix caches.")]
msgs = list(generate(pb.GenerateRequest(chat=pb.ChatMessages(messages=talk), max_tokens=6,
                                        stream=True, return_text=True), metadata=auth, timeout=20))
c = msgs[-1].complete
check(c.finish_reason == "length" and c.usage.completion_tokens == 6, f"chat over gRPC: {c}")
check("".join(m.chunk.text for m in msgs[:-1]) != "", "chat over gRPC streams its text")
time.sleep(0.3)
body = json.dumps({"model": "mock-8b", "max_tokens": 2, "messages": [
    {"role": m.role, "content": m.content} for m in talk]}).encode()
with urllib.request.urlopen(urllib.request.Request(http_url + "/v1/chat/completions", body, {
        "content-type": "application/json", "authorization": "Bearer " + key}), timeout=20) as r:
    chat_worker = r.headers["x-kvgate-worker"]
    chat_cached = json.load(r)["usage"]["prompt_tokens_details"]["cached_tokens"]
check(chat_worker == c.worker and chat_cached > 0,
      f"the same chat over HTTP: {chat_worker} ({chat_cached} cached), gRPC: {c.worker}")
repeat = [over_grpc(prompt(9))[-1].complete.worker for _ in range(4)]
check(len(set(repeat)) == 1, f"repeats of one prompt over gRPC stay on one worker: {repeat}")

# Cancelled mid-stream: the worker aborts it.
call = generate(pb.GenerateRequest(token_ids=pb.TokenIds(ids=prompt(20)), max_tokens=3000,
                                   stream=True), metadata=auth, timeout=60)
got = 0
for m in call:
    got += 1
    if got == 3:
        call.cancel()
        break
check(call.code() == grpc.StatusCode.CANCELLED, f"the cancelled call's code: {call.code()}")
# Past the deadline while the worker is still reading a 100,000-token prompt (5 s of prefill,
# no chunk yet to fail on): DEADLINE_EXCEEDED, and the worker is told at once.
req = pb.GenerateRequest(token_ids=pb.TokenIds(ids=prompt(21, 100000)), max_tokens=3000,
                         stream=True)
check(code_of(lambda: generate(req, metadata=auth, timeout=1.0)) ==
      grpc.StatusCode.DEADLINE_EXCEEDED, "a 1 s deadline on a long prefill: DEADLINE_EXCEEDED")
aborted, deadline_e2e = 0, None
for _ in range(100):
    records = [r for u in worker_urls for r in worker_records(u)]
    left = [r for r in records if r["prompt_tokens"] in (96, 100000) and r["status"] == "aborted"]
    aborted = len(left)
    deadline_e2e = next((r["e2e_s"] for r in left if r["prompt_tokens"] == 100000), None)
    if aborted >= 2:
        break
    time.sleep(0.1)
check(aborted == 2, f"the workers aborted {aborted} of the 2 generations their clients left")
check(deadline_e2e is not None and deadline_e2e < 3.0,
      f"the deadline's generation ended at the worker {deadline_e2e} s after it arrived (< 3)")

# Bad input.
bad = pb.GenerateRequest()
check(code_of(lambda: generate(bad, metadata=auth, timeout=10)) ==
      grpc.StatusCode.INVALID_ARGUMENT, "no input: INVALID_ARGUMENT")
huge = pb.GenerateRequest(token_ids=pb.TokenIds(ids=[5] * 200000), max_tokens=1)
check(code_of(lambda: generate(huge, metadata=auth, timeout=10)) ==
      grpc.StatusCode.INVALID_ARGUMENT, "a prompt past the context: INVALID_ARGUMENT")

# The fleet.
models = list_models(pb.ListModelsRequest(), metadata=auth, timeout=10).models
check([m.id for m in models] == ["mock-8b"] and models[0].workers == len(worker_urls),
      f"ListModels: {models}")
ws = list_workers(pb.ListWorkersRequest(), metadata=auth, timeout=10).workers
check(sorted(w.url for w in ws) == sorted(worker_urls) and all(w.routable for w in ws),
      f"ListWorkers: {ws}")
check(sum(w.index_blocks for w in ws) > 0, "ListWorkers: the index holds the prompts' blocks")

# grpc.health.v1.Health/Check: SERVING (status 1), for the server and for the service.
health = channel.unary_unary("/grpc.health.v1.Health/Check", lambda b: b, lambda b: b)
check(health(b"", timeout=10) == b"\x08\x01", "health: SERVING")
service = b"kvgate.v1.Gateway"
check(health(b"\x0a" + bytes([len(service)]) + service, timeout=10) == b"\x08\x01",
      "health of kvgate.v1.Gateway: SERVING")
reflect = channel.stream_stream("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                                lambda b: b, lambda b: b)
answer = b"".join(reflect(iter([b"\x3a\x00"]), timeout=10))  # list_services: ""
check(b"kvgate.v1.Gateway" in answer and b"grpc.health.v1.Health" in answer,
      "reflection lists kvgate.v1.Gateway and grpc.health.v1.Health")

print(f"gateway_grpc_client: {len(chunks)} chunks streamed, {same} of 6 prompts on the same "
      f"worker both ways, {aborted} aborted at the worker")
if problems:
    print("gateway_grpc_client: FAIL:\n  " + "\n  ".join(problems), file=sys.stderr)
    sys.exit(1)
