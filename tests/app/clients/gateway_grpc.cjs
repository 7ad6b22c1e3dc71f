// kvgate's gRPC API (kvgate.v2) from grpc-js, gRPC's pure-JavaScript client, with its messages
// loaded from the .proto files at run time (@grpc/proto-loader): streamed and unstreamed Generate
// (the sampling double checked where the mock engine received it), ListWorkers' enums, and the
// services listed through server reflection v1. Usage:
//   node gateway_grpc.cjs PROTO_DIR GRPC_ADDR API_KEY WORKER_URL...
// (NODE_PATH names the node_modules holding @grpc/grpc-js and @grpc/proto-loader.) Prints one
// line per step and exits non-zero at the first that fails.
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const [protoDir, addr, key, ...workers] = process.argv.slice(2);
const loaded = protoLoader.loadSync(
  ['kvgate/v2/gateway.proto', 'grpc/reflection/v1/reflection.proto'],
  { includeDirs: [protoDir], keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true });
const api = grpc.loadPackageDefinition(loaded);
const creds = grpc.credentials.createInsecure();
const gateway = new api.kvgate.v2.Gateway(addr, creds);
const reflection = new api.grpc.reflection.v1.ServerReflection(addr, creds);

function check(cond, what) {
  if (!cond) throw new Error('check failed: ' + what);
}

function auth() {
  const md = new grpc.Metadata();
  md.add('authorization', 'Bearer ' + key);
  return md;
}

function deadline() {
  return { deadline: Date.now() + 20000 };
}

// Every message of a Generate call, once it ends.
function generate(request) {
  return new Promise((resolve, reject) => {
    const messages = [];
    const call = gateway.Generate(request, auth(), deadline());
    call.on('data', (m) => messages.push(m));
    call.on('error', reject);
    call.on('end', () => resolve(messages));
  });
}

function unary(method, request) {
  return new Promise((resolve, reject) => {
    gateway[method](request, auth(), deadline(), (err, answer) => (err ? reject(err) : resolve(answer)));
  });
}

// What the engine received for `requestId` (the mock's /admin/bodies), polled until it is there.
async function engineBody(requestId) {
  for (let i = 0; i < 100; i++) {
    for (const url of workers) {
      const answer = await (await fetch(url + '/admin/bodies')).json();
      const found = answer.bodies.find((b) => b.request_id === requestId);
      if (found) return found;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return null;
}

function listServices() {
  return new Promise((resolve, reject) => {
    const call = reflection.ServerReflectionInfo(deadline());
    const names = [];
    call.on('data', (m) => names.push(...m.list_services_response.service.map((s) => s.name)));
    call.on('error', reject);
    call.on('end', () => resolve(names));
    call.write({ list_services: '' });
    call.end();
  });
}

const ids = Array.from({ length: 64 }, (_, i) => 2000 + i * 13);

async function main() {
  const streamed = await generate({
    token_ids: { ids }, max_tokens: 5, stream: true, return_text: true,
    sampling: { temperature: 0.2, top_p: 0.95 }, request_id: 'grpc-js-stream',
  });
  const chunks = streamed.filter((m) => m.kind === 'chunk').map((m) => m.chunk);
  const done = streamed[streamed.length - 1].complete;
  check(chunks.reduce((n, c) => n + c.token_ids.length, 0) === 5, 'five token ids streamed');
  check(chunks[chunks.length - 1].finish_reason === 'FINISH_REASON_LENGTH', 'the last chunk finishes');
  check(chunks.slice(0, -1).every((c) => c.finish_reason === 'FINISH_REASON_UNSPECIFIED'),
    'no earlier chunk finishes');
  check(done && workers.includes(done.worker) && done.usage.completion_tokens === 5, 'Complete');
  const body = await engineBody('grpc-js-stream');
  check(body && body.body.includes('"temperature":0.2,') && body.body.includes('"top_p":0.95'),
    'the doubles reached the engine exactly: ' + (body && body.body.slice(-200)));
  console.log('ok Generate streamed');

  const whole = await generate({ token_ids: { ids }, max_tokens: 3, n: 2 });
  check(whole.length === 1 && whole[0].kind === 'complete', 'unstreamed: one Complete');
  const choices = whole[0].complete.choices;
  check(choices.length === 2 && choices.every((c) => c.token_ids.length === 3 &&
    c.finish_reason === 'FINISH_REASON_LENGTH'), 'two whole choices');
  console.log('ok Generate unstreamed');

  const fleet = await unary('ListWorkers', {});
  check(fleet.workers.length === workers.length && fleet.workers.every((w) =>
    w.health === 'HEALTH_HEALTHY' && w.liveness === 'LIVENESS_LIVE' &&
    w.circuit_breaker === 'CIRCUIT_BREAKER_CLOSED' && workers.includes(w.url)), 'ListWorkers enums');
  console.log('ok ListWorkers');

  const services = await listServices();
  for (const s of ['kvgate.v2.Gateway', 'kvgate.v1.Gateway', 'grpc.health.v1.Health',
    'grpc.reflection.v1.ServerReflection']) {
    check(services.includes(s), 'reflection v1 lists ' + s + ': ' + services);
  }
  console.log('ok reflection v1 lists ' + services.join(', '));

  let refused = null;
  try {
    await generate({ token_ids: { ids }, max_tokens: 0 });
  } catch (e) {
    refused = e;
  }
  check(refused && refused.code === grpc.status.INVALID_ARGUMENT && /max_tokens/.test(refused.details),
    'max_tokens 0: INVALID_ARGUMENT naming it');
  console.log('ok max_tokens 0 refused');
}

main().then(() => process.exit(0), (e) => {
  console.error(e.message || e);
  process.exit(1);
});
