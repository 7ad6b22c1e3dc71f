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
  the services;
- kvgate.v2 beside v1, checked against what the engine received (the mock's /admin/bodies):
  sampling doubles arriving exactly, max_tokens absent (null to a completion, nothing to a chat)
  and 0 refused, token ids sent as a completion's prompt, the finish reason on each choice's last
  chunk, n > 1, logprobs, content parts and tools, structured output, Tokenize of a conversation
  (as HTTP /tokenize answers it), Embed (as HTTP /v1/embeddings answers it), enums in ListWorkers,
  reflection v1 listing and describing the services.

  gateway_grpc_client.py GENERATED_DIR GRPC_ADDR HTTP_URL API_KEY WORKER_URL...
GENERATED_DIR holds kvgate/v1/gateway_pb2.py and kvgate/v2/gateway_pb2.py (protoc --python_out).
With KVG_GRPC_ONLY=sglang only v2's token-id generation runs, against mock workers in SGLang's
personality: through SGLang's /generate (input_ids) and through /v1/completions."""
import json
import os
import sys
import time
import urllib.request

sys.path.insert(0, sys.argv[1])
import grpc  # noqa: E402
from kvgate.v1 import gateway_pb2 as pb  # noqa: E402
from kvgate.v2 import gateway_pb2 as pb2  # noqa: E402

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


# ---- kvgate.v2 ----
P2 = "/kvgate.v2.Gateway/"
generate2 = channel.unary_stream(P2 + "Generate", pb2.GenerateRequest.SerializeToString,
                                 pb2.GenerateResponse.FromString)
embed2 = channel.unary_unary(P2 + "Embed", pb2.EmbedRequest.SerializeToString,
                             pb2.EmbedResponse.FromString)
tokenize2 = channel.unary_unary(P2 + "Tokenize", pb2.TokenizeRequest.SerializeToString,
                                pb2.TokenizeResponse.FromString)
list_workers2 = channel.unary_unary(P2 + "ListWorkers", pb2.ListWorkersRequest.SerializeToString,
                                    pb2.ListWorkersResponse.FromString)
LENGTH = pb2.FINISH_REASON_LENGTH
UNSPECIFIED = pb2.FINISH_REASON_UNSPECIFIED


def finish(summary):
    print("gateway_grpc_client: " + summary)
    if problems:
        print("gateway_grpc_client: FAIL:\n  " + "\n  ".join(problems), file=sys.stderr)
        sys.exit(1)
    sys.exit(0)


def engine_body(request_id):
    """What the engine received for the request `request_id`: (path, parsed body, raw body)."""
    for _ in range(100):
        for url in worker_urls:
            with urllib.request.urlopen(url + "/admin/bodies", timeout=10) as r:
                for b in json.load(r)["bodies"]:
                    if b["request_id"] == request_id:
                        return b["path"], json.loads(b["body"]), b["body"]
        time.sleep(0.05)
    return None, {}, ""


def v2_call(request_id, **kw):
    """Generate over v2: (chunks, Complete) or the error's status code."""
    req = pb2.GenerateRequest(request_id=request_id, **kw)
    try:
        msgs = list(generate2(req, metadata=auth, timeout=20))
    except grpc.RpcError as e:
        return e.code(), e.details()
    return [m.chunk for m in msgs[:-1]], msgs[-1].complete


def refused(what, needle, **kw):
    got = v2_call("v2-bad-" + what, **kw)
    check(got[0] == grpc.StatusCode.INVALID_ARGUMENT and needle in (got[1] or ""),
          f"{what}: INVALID_ARGUMENT naming {needle}, got {got}")


def ids_of(tag, n=48):
    return pb2.TokenIds(ids=prompt(tag, n))


def check_sglang_personality():
    """Token ids to mock workers in SGLang's personality, through both engine APIs."""
    ids = prompt(40, 64)
    chunks_, done = v2_call("v2-sglang-native", token_ids=pb2.TokenIds(ids=ids), max_tokens=5,
                            stream=True, return_text=True,
                            engine_api=pb2.ENGINE_API_SGLANG_GENERATE,
                            sampling=pb2.SamplingParams(temperature=0.7, seed=7))
    path, body, _ = engine_body("v2-sglang-native")
    check(path == "/generate" and body.get("input_ids") == ids,
          f"SGLang /generate got the prompt as input_ids: {path} {body}")
    check(body.get("sampling_params", {}).get("temperature") == 0.7 and
          body["sampling_params"].get("max_new_tokens") == 5 and
          body["sampling_params"].get("sampling_seed") == 7, f"sampling_params: {body}")
    if isinstance(done, pb2.Complete):
        streamed = [t for c in chunks_ for t in c.token_ids]
        check(len(streamed) == 5 and done.usage.completion_tokens == 5,
              f"/generate: 5 token ids streamed once each: {streamed}, {done.usage}")
        check(chunks_[-1].finish_reason == LENGTH and done.choices[0].finish_reason == LENGTH,
              f"/generate: finish reason on the last chunk: {chunks_[-1]}")
        check("".join(c.text for c in chunks_).count(" ") == 5, "/generate: the text once")
    else:
        check(False, f"SGLang /generate with token ids: {done}")
    _, whole = v2_call("v2-sglang-whole", token_ids=pb2.TokenIds(ids=ids), max_tokens=4,
                       engine_api=pb2.ENGINE_API_SGLANG_GENERATE)
    check(isinstance(whole, pb2.Complete) and len(whole.choices[0].token_ids) == 4,
          f"/generate unstreamed: every token id once: {whole}")
    _, done = v2_call("v2-sglang-openai", token_ids=pb2.TokenIds(ids=ids), max_tokens=3)
    path, body, _ = engine_body("v2-sglang-openai")
    check(path == "/v1/completions" and body.get("prompt") == ids and body.get("return_token_ids"),
          f"SGLang /v1/completions got the prompt as ids: {path} {body}")
    check(isinstance(done, pb2.Complete) and len(done.choices[0].token_ids) == 3,
          f"SGLang /v1/completions: 3 token ids: {done}")
    refused("sglang-chat", "chat", engine_api=pb2.ENGINE_API_SGLANG_GENERATE,
            chat=pb2.ChatMessages(messages=[pb2.ChatMessage(role="user", text="hi")]))


def check_v2_sampling():
    sampling = pb2.SamplingParams(temperature=0.2, top_p=0.9, min_p=0.05, presence_penalty=0.1,
                                  frequency_penalty=0.3, repetition_penalty=1.1, top_k=40,
                                  seed=1234, min_tokens=2, logit_bias={5: -1.5, 17: 0.25})
    chunks_, done = v2_call("v2-doubles", token_ids=ids_of(50), max_tokens=4, sampling=sampling,
                            stop=["\n\n"], stop_token_ids=[2], skip_special_tokens=False,
                            include_stop_str_in_output=True)
    path, body, raw = engine_body("v2-doubles")
    check(path == "/v1/completions" and body.get("prompt") == prompt(50, 48),
          f"token ids went as a completion's prompt: {path}")
    for name, want in (("temperature", 0.2), ("top_p", 0.9), ("min_p", 0.05),
                       ("presence_penalty", 0.1), ("frequency_penalty", 0.3),
                       ("repetition_penalty", 1.1)):
        check(body.get(name) == want and f'"{name}":{want}' in raw,
              f"{name} reached the engine as {body.get(name)!r} (raw: {raw[:400]})")
    check(body.get("logit_bias") == {"5": -1.5, "17": 0.25}, f"logit_bias: {body.get('logit_bias')}")
    check(body.get("top_k") == 40 and body.get("seed") == 1234 and body.get("min_tokens") == 2,
          f"top_k, seed, min_tokens: {body}")
    check(body.get("stop") == ["\n\n"] and body.get("stop_token_ids") == [2] and
          body.get("skip_special_tokens") is False and
          body.get("include_stop_str_in_output") is True, f"stops: {body}")
    check(isinstance(done, pb2.Complete) and done.worker in worker_urls, f"doubles call: {done}")


def check_v2_max_tokens():
    chunks_, done = v2_call("v2-no-max", token_ids=ids_of(51), stream=True)
    _, body, _ = engine_body("v2-no-max")
    check("max_tokens" in body and body["max_tokens"] is None,
          f"absent max_tokens: a completion's max_tokens null (the context's end): {body}")
    check(isinstance(done, pb2.Complete) and done.usage.completion_tokens > 0,
          f"absent max_tokens generates: {done}")
    talk = pb2.ChatMessages(messages=[pb2.ChatMessage(role="user", text="hello there")])
    _, done = v2_call("v2-no-max-chat", chat=talk)
    _, body, _ = engine_body("v2-no-max-chat")
    check("max_tokens" not in body and "max_completion_tokens" not in body,
          f"absent max_tokens: nothing for a chat (the engine's default): {body}")
    _, done = v2_call("v2-max-chat", chat=talk, max_tokens=3)
    _, body, _ = engine_body("v2-max-chat")
    check(body.get("max_completion_tokens") == 3 and isinstance(done, pb2.Complete) and
          done.usage.completion_tokens == 3, f"a chat's max_tokens: {body} {done}")
    refused("max-zero", "max_tokens", token_ids=ids_of(52), max_tokens=0)


def check_v2_stream():
    chunks_, done = v2_call("v2-stream", token_ids=ids_of(53), max_tokens=6, stream=True,
                            return_text=True)
    if not isinstance(done, pb2.Complete):
        check(False, f"streamed v2: {done}")
        return
    check(sum(len(c.token_ids) for c in chunks_) == 6 and all(c.text for c in chunks_),
          f"6 token ids with their text over the chunks: {chunks_}")
    check(chunks_[-1].finish_reason == LENGTH and
          all(c.finish_reason == UNSPECIFIED for c in chunks_[:-1]),
          f"only the last chunk carries the finish reason: {[c.finish_reason for c in chunks_]}")
    check([c.finish_reason for c in done.choices] == [LENGTH] and not done.choices[0].token_ids,
          f"a streamed Complete: each choice's finish reason alone: {done}")
    check(done.usage.prompt_tokens == 48 and done.usage.completion_tokens == 6,
          f"usage: {done.usage}")


def check_v2_n():
    chunks_, done = v2_call("v2-n3", token_ids=ids_of(54), max_tokens=4, n=3, stream=True)
    by_choice = {}
    for c in chunks_:
        by_choice.setdefault(c.index, []).append(c)
    check(sorted(by_choice) == [0, 1, 2], f"n=3: chunks of choices {sorted(by_choice)}")
    for index, cs in by_choice.items():
        check(sum(len(c.token_ids) for c in cs) == 4 and cs[-1].finish_reason == LENGTH,
              f"choice {index}: 4 tokens, its last chunk finishing it: {cs}")
    check(isinstance(done, pb2.Complete) and [c.index for c in done.choices] == [0, 1, 2],
          f"n=3: Complete names the three choices: {done}")
    _, body, _ = engine_body("v2-n3")
    check(body.get("n") == 3, f"n reached the engine: {body}")
    _, whole = v2_call("v2-n2", token_ids=ids_of(55), max_tokens=3, n=2, return_text=True)
    check(isinstance(whole, pb2.Complete) and len(whole.choices) == 2 and
          all(len(c.token_ids) == 3 and c.text and c.finish_reason == LENGTH
              for c in whole.choices), f"n=2 unstreamed: two whole choices: {whole}")


def mock_logprob(token_id):
    return -0.125 * (token_id % 8 + 1)  # the mock's made-up value (src/mock/api.cc)


def check_v2_logprobs():
    _, done = v2_call("v2-logprobs", token_ids=ids_of(56), max_tokens=3, logprobs=True,
                      top_logprobs=2)
    _, body, _ = engine_body("v2-logprobs")
    check(body.get("logprobs") == 2, f"a completion's logprobs is the top count: {body}")
    if isinstance(done, pb2.Complete):
        c = done.choices[0]
        check(len(c.logprobs) == 3 and
              [lp.logprob for lp in c.logprobs] == [mock_logprob(t) for t in c.token_ids] and
              all(len(lp.top_logprobs) == 2 for lp in c.logprobs),
              f"a logprob per token with 2 alternatives: {c}")
    else:
        check(False, f"logprobs: {done}")
    talk = pb2.ChatMessages(messages=[pb2.ChatMessage(role="user", text="log me")])
    chunks_, done = v2_call("v2-chat-logprobs", chat=talk, max_tokens=2, logprobs=True,
                            top_logprobs=1, stream=True)
    _, body, _ = engine_body("v2-chat-logprobs")
    check(body.get("logprobs") is True and body.get("top_logprobs") == 1,
          f"a chat's logprobs flag and top_logprobs: {body}")
    got = [lp for c in chunks_ for lp in c.logprobs]
    check(len(got) == 2 and all(len(lp.top_logprobs) == 1 for lp in got),
          f"streamed chat logprobs: {got}")
    refused("top-without-logprobs", "top_logprobs", token_ids=ids_of(57), top_logprobs=2)


def check_v2_chat_shapes():
    tool = pb2.Tool(function=pb2.FunctionDefinition(
        name="get_weather", description="The weather in a city",
        parameters_json='{"type":"object","properties":{"city":{"type":"string"}}}'))
    messages = [
        pb2.ChatMessage(role="system", text="You are terse."),
        pb2.ChatMessage(role="user", name="ana", parts=pb2.ContentParts(parts=[
            pb2.ContentPart(text="What is in this picture?"),
            pb2.ContentPart(image_url=pb2.ImageUrl(url="data:image/png;base64,AAAA"))])),
        pb2.ChatMessage(role="assistant", tool_calls=[pb2.ToolCall(
            id="call_1", function=pb2.FunctionCall(name="get_weather",
                                                   arguments='{"city":"Lima"}'))]),
        pb2.ChatMessage(role="tool", tool_call_id="call_1", text="sunny"),
    ]
    talk = pb2.ChatMessages(messages=messages, tools=[tool],
                            tool_choice=pb2.ToolChoice(mode="auto"))
    _, done = v2_call("v2-chat-shapes", chat=talk, max_tokens=2,
                      structured_output=pb2.StructuredOutput(json_schema='{"type":"object"}'))
    path, body, _ = engine_body("v2-chat-shapes")
    m = body.get("messages", [{}] * 4)
    check(path == "/v1/chat/completions" and m[1].get("name") == "ana" and
          m[1]["content"][1] == {"type": "image_url",
                                 "image_url": {"url": "data:image/png;base64,AAAA"}},
          f"content parts and name: {m[1] if len(m) > 1 else m}")
    check(m[2].get("content") is None and m[2]["tool_calls"][0]["function"]["name"] ==
          "get_weather" and m[3].get("tool_call_id") == "call_1", f"tool turns: {m}")
    check(body.get("tools", [{}])[0].get("function", {}).get("parameters", {}).get("type") ==
          "object" and body.get("tool_choice") == "auto", f"tools: {body.get('tools')}")
    check(body.get("guided_json") == {"type": "object"}, f"guided_json: {body}")
    check(isinstance(done, pb2.Complete) and done.choices[0].finish_reason == LENGTH,
          f"a chat with parts and tools: {done}")
    _, done = v2_call("v2-choice", token_ids=ids_of(58), max_tokens=1,
                      structured_output=pb2.StructuredOutput(
                          choice=pb2.StringList(values=["yes", "no"])))
    _, body, _ = engine_body("v2-choice")
    check(body.get("guided_choice") == ["yes", "no"], f"guided_choice: {body}")
    refused("bad-schema", "json_schema", token_ids=ids_of(59),
            structured_output=pb2.StructuredOutput(json_schema="{not json"))


def check_v2_tokenize_embed():
    talk = pb2.ChatMessages(messages=[pb2.ChatMessage(role="system", text="Be brief."),
                                      pb2.ChatMessage(role="user", text="Count my tokens.")])
    got = tokenize2(pb2.TokenizeRequest(model="mock-8b", chat=talk), metadata=auth, timeout=10)
    body = json.dumps({"model": "mock-8b", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Count my tokens."}]}).encode()
    with urllib.request.urlopen(urllib.request.Request(http_url + "/tokenize", body, {
            "content-type": "application/json", "authorization": "Bearer " + key}),
            timeout=10) as r:
        over_http_ = json.load(r)
    check(len(got.token_ids) > 5 and list(got.token_ids) == over_http_["tokens"],
          f"Tokenize of a conversation as HTTP /tokenize: {list(got.token_ids)} vs {over_http_}")
    text = tokenize2(pb2.TokenizeRequest(text="a few words"), metadata=auth, timeout=10)
    check(len(text.token_ids) > 0, f"Tokenize of a text: {text}")
    answer = embed2(pb2.EmbedRequest(model="mock-8b", inputs=[pb2.EmbedInput(
        text="embed this sentence"), pb2.EmbedInput(text="and this one")], request_id="v2-embed"),
        metadata=auth, timeout=10)
    body = json.dumps({"model": "mock-8b", "input": ["embed this sentence", "and this one"]})
    with urllib.request.urlopen(urllib.request.Request(
            http_url + "/v1/embeddings", body.encode(), {
                "content-type": "application/json", "authorization": "Bearer " + key}),
            timeout=10) as r:
        over_http_ = json.load(r)
    check(len(answer.embeddings) == 2 and answer.prompt_tokens > 0 and
          answer.worker in worker_urls and answer.request_id == "v2-embed",
          f"Embed: {len(answer.embeddings)} embeddings, worker {answer.worker}")
    want = [[float(pb2.Embedding(values=[v]).values[0]) for v in d["embedding"]]
            for d in over_http_["data"]]
    check([list(e.values) for e in answer.embeddings] == want,
          "Embed's values are HTTP /v1/embeddings' (as float32)")
    path, _, _ = engine_body("v2-embed")
    check(path == "/v1/embeddings", f"Embed went to the engine's /v1/embeddings: {path}")


def reflection_v1(request_bytes):
    call = channel.stream_stream("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                                 lambda b: b, lambda b: b)
    return b"".join(call(iter([request_bytes]), timeout=10))


def check_v2_fleet():
    ws = list_workers2(pb2.ListWorkersRequest(), metadata=auth, timeout=10).workers
    check(sorted(w.url for w in ws) == sorted(worker_urls) and
          all(w.health == pb2.HEALTH_HEALTHY and w.liveness == pb2.LIVENESS_LIVE and
              w.circuit_breaker == pb2.CIRCUIT_BREAKER_CLOSED for w in ws),
          f"v2 ListWorkers with enums: {ws}")
    health = channel.unary_unary("/grpc.health.v1.Health/Check", lambda b: b, lambda b: b)
    name = b"kvgate.v2.Gateway"
    check(health(b"\x0a" + bytes([len(name)]) + name, timeout=10) == b"\x08\x01",
          "health of kvgate.v2.Gateway: SERVING")
    listed = reflection_v1(b"\x3a\x00")  # list_services: ""
    check(all(s in listed for s in (b"kvgate.v2.Gateway", b"kvgate.v1.Gateway",
                                     b"grpc.reflection.v1.ServerReflection")),
          f"reflection v1 lists the services: {listed!r}")
    symbol = b"kvgate.v2.Gateway"
    described = reflection_v1(b"\x22" + bytes([len(symbol)]) + symbol)  # file_containing_symbol
    check(b"kvgate/v2/gateway.proto" in described and b"Generate" in described,
          "reflection v1 describes kvgate.v2.Gateway")


def check_v2():
    check_v2_sampling()
    check_v2_max_tokens()
    check_v2_stream()
    check_v2_n()
    check_v2_logprobs()
    check_v2_chat_shapes()
    check_v2_tokenize_embed()
    check_v2_fleet()


if os.environ.get("KVG_GRPC_ONLY") == "sglang":
    check_sglang_personality()
    finish("SGLang personality: token ids through /generate and /v1/completions")


def check_v1():
    """kvgate.v1, unchanged for its clients."""
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
    return chunks, same, aborted


chunks, same, aborted = check_v1()
check_v2()
finish(f"{len(chunks)} v1 chunks streamed, {same} of 6 prompts on the same worker both ways, "
       f"{aborted} aborted at the worker; v2 checked")
