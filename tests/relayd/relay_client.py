#!/usr/bin/python3
"""A client of kvgate's relay written against the proto alone, with Debian's python3-grpcio (not
kvgate's C++ code): checks ListWorkers, a fresh subscription's batches, a resume that sends only
what is new, a resume in another epoch that gets OutOfRange and the snapshot, refusals, and the
standard health and reflection services.

  relay_client.py GENERATED_DIR RELAY_ADDR ENGINE_URL COMMAND_TO_MAKE_TRAFFIC...
GENERATED_DIR holds kvgate/relay/v1/relay_pb2.py (protoc --python_out)."""
import subprocess
import sys

sys.path.insert(0, sys.argv[1])
import grpc  # noqa: E402
from kvgate.relay.v1 import relay_pb2 as pb  # noqa: E402

addr, engine, traffic = sys.argv[2], sys.argv[3], sys.argv[4:]
channel = grpc.insecure_channel(addr)
P = "/kvgate.relay.v1.Relay/"
list_workers = channel.unary_unary(P + "ListWorkers", pb.ListWorkersRequest.SerializeToString,
                                   pb.ListWorkersResponse.FromString)
subscribe = channel.unary_stream(P + "Subscribe", pb.SubscribeRequest.SerializeToString,
                                 pb.SubscribeResponse.FromString)
problems = []


def check(ok, what):
    if not ok:
        problems.append(what)


def read_until_heartbeat(request, limit=2000):
    """The messages of one stream up to its first heartbeat (the stream has caught up)."""
    out = []
    call = subscribe(request, timeout=20)
    for m in call:
        if m.WhichOneof("kind") == "heartbeat":
            call.cancel()
            return out, m.heartbeat
        out.append(m)
        if len(out) > limit:
            break
    call.cancel()
    return out, None


def make_traffic(n):
    for i in range(n):
        subprocess.run(traffic + [str(i)], check=True)


# The relay discovered the engine and says what it serves.
workers = {w.name: w for w in list_workers(pb.ListWorkersRequest(), timeout=10).workers}
check(engine in workers, f"ListWorkers names {engine}: {list(workers)}")
w = workers.get(engine, pb.WorkerInfo())
check(w.block_size > 0 and len(w.ranks) >= 1, f"block size and ranks: {w}")

make_traffic(3)
fresh, hb = read_until_heartbeat(pb.SubscribeRequest(worker=engine, rank=0))
batches = [m.batch for m in fresh if m.WhichOneof("kind") == "batch"]
seqs = [b.seq for b in batches]
check(len(batches) >= 3, f"a fresh subscriber got {len(batches)} batches, want the 3 requests'")
check(seqs == list(range(seqs[0], seqs[0] + len(seqs))) if seqs else False,
      f"batches in order without a gap: {seqs}")
check(all(m.WhichOneof("kind") == "batch" for m in fresh), "only batches for a fresh subscriber")
stored = sum(len(e.engine_hashes) for b in batches for e in b.events
             if e.kind == pb.EVENT_KIND_STORED)
check(stored > 0, "stored blocks in the batches")
check(all(len(e.engine_hashes) == len(e.local_hashes) for b in batches for e in b.events
          if e.kind == pb.EVENT_KIND_STORED), "a local hash per engine hash")
epoch = batches[-1].epoch if batches else 0
check(hb is not None and hb.epoch == epoch and hb.last_seq == seqs[-1],
      f"the heartbeat names the newest batch: {hb}")

# Resume where it stopped: only what is new.
make_traffic(2)
resumed, _ = read_until_heartbeat(pb.SubscribeRequest(worker=engine, rank=0, epoch=epoch,
                                                      from_seq=seqs[-1] + 1))
new = [m.batch.seq for m in resumed if m.WhichOneof("kind") == "batch"]
check(len(new) >= 2 and new[0] == seqs[-1] + 1, f"a resume got {new} after {seqs[-1]}")

# Another epoch: OutOfRange, then the snapshot of what the engine holds now.
moved, _ = read_until_heartbeat(pb.SubscribeRequest(worker=engine, rank=0, epoch=epoch + 1,
                                                    from_seq=3))
kinds = [m.WhichOneof("kind") for m in moved]
check(kinds[:1] == ["out_of_range"] and
      moved[0].out_of_range.reason == pb.OutOfRange.REASON_OTHER_EPOCH,
      f"another epoch starts with OutOfRange: {kinds}")
chunks = [m.snapshot for m in moved if m.WhichOneof("kind") == "snapshot"]
check(chunks and chunks[-1].last and chunks[-1].has_seq and chunks[-1].seq == new[-1],
      f"the snapshot ends at the newest batch {new[-1] if new else None}")
snap_blocks = sum(len(e.engine_hashes) for c in chunks for e in c.events
                  if e.kind == pb.EVENT_KIND_STORED)
check(chunks and chunks[-1].blocks > 0 and snap_blocks >= chunks[-1].blocks,
      f"the snapshot holds blocks: {chunks[-1].blocks if chunks else None}")

# Refusals in gRPC's words.
for req, code in [(pb.SubscribeRequest(worker="http://10.0.0.1:1"), grpc.StatusCode.NOT_FOUND),
                  (pb.SubscribeRequest(worker=engine, rank=99), grpc.StatusCode.NOT_FOUND),
                  (pb.SubscribeRequest(rank=0), grpc.StatusCode.INVALID_ARGUMENT)]:
    try:
        list(subscribe(req, timeout=10))
        problems.append(f"{req} was not refused")
    except grpc.RpcError as e:
        check(e.code() == code, f"{req}: {e.code()}, want {code}")

# grpc.health.v1.Health/Check (empty service name: the server) answers SERVING (status 1).
health = channel.unary_unary("/grpc.health.v1.Health/Check", lambda b: b, lambda b: b)
check(health(b"", timeout=10) == b"\x08\x01", "health: SERVING")
# Server reflection lists the relay's service.
reflect = channel.stream_stream("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                                lambda b: b, lambda b: b)
answer = b"".join(reflect(iter([b"\x3a\x00"]), timeout=10))  # list_services: ""
check(b"kvgate.relay.v1.Relay" in answer, "reflection lists kvgate.relay.v1.Relay")

print(f"relay_client: {len(batches)} batches fresh, {len(new)} on resume, "
      f"{len(chunks)} snapshot chunks of {chunks[-1].blocks if chunks else 0} blocks")
if problems:
    print("relay_client: FAIL:\n  " + "\n  ".join(problems), file=sys.stderr)
    sys.exit(1)
