// The Kubernetes manifests of deploy/kubernetes: every object against Kubernetes' own schemas
// (npm kubernetes-models, and @kubernetes-models/prometheus-operator for the ServiceMonitor), read
// by kubectl offline and rendered by kubectl's kustomize (as shipped, and with every optional part
// uncommented), and consistent with each other and with the kvgate binary's flags.
// Usage: node manifests_test.cjs SOURCE_DIR KVGATE_BINARY
// The npm packages come from $KVGATE_NPM_DIR (else ~/.cache/kvgate/npm), where tools/setup.sh
// installs them. Prints every failed check and exits 1 if there is one.
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { createRequire } = require('node:module');

const [sourceDir, kvgateBinary] = process.argv.slice(2);
if (!sourceDir || !kvgateBinary) {
  console.error('usage: node manifests_test.cjs SOURCE_DIR KVGATE_BINARY');
  process.exit(2);
}
const manifestsDir = path.join(sourceDir, 'deploy', 'kubernetes');

let passed = 0;
const failures = [];
function check(cond, where, what) {
  if (cond) {
    passed++;
  } else {
    failures.push(`${where}: ${what}`);
  }
  return cond;
}

// --- the npm packages ---
const npmDir =
  process.env.KVGATE_NPM_DIR || path.join(process.env.HOME || '/root', '.cache/kvgate/npm');
const npmRequire = createRequire(path.join(npmDir, 'node_modules', '.kvgate'));
function load(name) {
  try {
    return npmRequire(name);
  } catch (e) {
    console.error(`cannot load ${name} from ${npmDir}/node_modules (${e.code || e.message}): ` +
                  'run tools/setup.sh (make setup)');
    process.exit(1);
  }
}
const yaml = load('js-yaml');
load('kubernetes-models/v1');
load('@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1');
// Each apiVersion's classes, one per kind, each with validate() against its JSON schema (an
// apiVersion neither package has gets none).
function modelsOf(apiVersion) {
  const pkg = apiVersion.startsWith('monitoring.coreos.com/')
    ? '@kubernetes-models/prometheus-operator' : 'kubernetes-models';
  try {
    return npmRequire(`${pkg}/${apiVersion}`);
  } catch {
    return {};
  }
}

function validateSchema(obj, where) {
  const Model = modelsOf(obj.apiVersion)[obj.kind];
  const known = check(typeof Model === 'function', where,
                      `no schema for ${obj.apiVersion} ${obj.kind} (a wrong apiVersion or kind?)`);
  if (!known) return;
  try {
    new Model(obj).validate();
    passed++;
  } catch (e) {
    const errors = e.errors || [{ instancePath: '', message: e.message }];
    for (const err of errors) {
      const extra = err.params && err.params.allowedValues
        ? ` (${err.params.allowedValues.join(', ')})` : '';
      failures.push(`${where}: schema: ${err.instancePath || '/'} ${err.message}${extra}`);
    }
  }
}

// Temporary folders, removed however the script exits.
const tempDirs = [];
process.on('exit', () => {
  for (const d of tempDirs) fs.rmSync(d, { recursive: true, force: true });
});
function tempDir(prefix) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  tempDirs.push(d);
  return d;
}

// --- kubectl, offline: no cluster is reachable or needed (an empty kubeconfig) ---
const kubeconfig = path.join(tempDir('kvgate-kube-'), 'config');
fs.writeFileSync(kubeconfig, '');
function kubectl(args) {
  try {
    return execFileSync('kubectl', args, {
      encoding: 'utf8', env: { ...process.env, KUBECONFIG: kubeconfig },
      stdio: ['ignore', 'pipe', 'pipe'], timeout: 60000,
    });
  } catch (e) {
    if (e.code === 'ENOENT') {
      console.error('kubectl is missing: run tools/setup.sh (make setup)');
      process.exit(1);
    }
    return { error: `kubectl ${args.join(' ')} failed: ${(e.stderr || e.message).trim()}` };
  }
}
const version = kubectl(['version', '--client', '-o', 'json']);
if (typeof version !== 'string') {
  console.error(version.error);
  process.exit(1);
}
const kubectlMinor = parseInt(JSON.parse(version).clientVersion.minor, 10);

// --- kvgate's flags, from its --help ---
let help;
try {
  help = execFileSync(kvgateBinary, ['--help'], { encoding: 'utf8', timeout: 30000 });
} catch (e) {
  console.error(`${kvgateBinary} --help failed: ${e.message}`);
  process.exit(1);
}
// An option line starts with two spaces and its names, e.g. "  --max-retries,--retry-max-retries".
const knownFlags = new Set();
for (const line of help.split('\n')) {
  const m = /^ {2}(-\S+)/.exec(line);
  if (!m) continue;
  for (const name of m[1].split(',')) {
    if (name.startsWith('--')) knownFlags.add(name.slice(2));
  }
}
check(knownFlags.has('port') && knownFlags.has('shutdown-grace-period-secs'), kvgateBinary,
      `--help lists its flags (read ${knownFlags.size})`);

// --- the manifest files ---
function yamlFiles(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return yamlFiles(p);
    return /\.ya?ml$/.test(e.name) ? [p] : [];
  }).sort();
}
function parseAll(text, where) {
  try {
    return yaml.loadAll(text).filter((d) => d !== null && d !== undefined);
  } catch (e) {
    check(false, where, `not YAML: ${e.message}`);
    return [];
  }
}
const rel = (p) => path.relative(sourceDir, p);
const id = (o) => `${o?.kind} ${o?.metadata?.name}`;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

const objectFiles = new Map();  // absolute path -> its objects
for (const file of yamlFiles(manifestsDir)) {
  if (path.basename(file) === 'kustomization.yaml') continue;
  const objects = parseAll(fs.readFileSync(file, 'utf8'), rel(file));
  check(objects.length > 0, rel(file), 'holds no object');
  for (const o of objects) {
    const where = `${rel(file)}: ${id(o)}`;
    if (!check(o && o.apiVersion && o.kind && o.metadata && o.metadata.name, where,
               'an object needs apiVersion, kind and metadata.name')) continue;
    check(DNS_LABEL.test(o.metadata.name), where, `name "${o.metadata.name}" is no DNS label`);
    check(o.metadata.namespace === undefined, where,
          'names a namespace (kustomization.yaml sets it; the files stay namespace-agnostic)');
    validateSchema(o, where);
  }
  // kubectl reads the same objects from the file (annotate --local parses it offline and names
  // each object; the annotation goes nowhere).
  const named = kubectl(['annotate', '--local', '-f', file, '-o', 'name', 'kvgate.io/check=1']);
  if (check(typeof named === 'string', rel(file), named.error)) {
    const names = named.trim().split('\n').map((l) => l.slice(l.lastIndexOf('/') + 1));
    check(JSON.stringify(names) === JSON.stringify(objects.map((o) => o.metadata.name)),
          rel(file), `kubectl reads ${names.join(', ')}, js-yaml ${objects.map(id).join(', ')}`);
  }
  objectFiles.set(file, objects);
  console.log(`${rel(file)}: ${objects.map(id).join(', ')}`);
}

// --- renders ---
function render(dir, label) {
  const out = kubectl(['kustomize', dir]);
  if (!check(typeof out === 'string', label, out.error)) return null;
  const objects = parseAll(out, label);
  console.log(`${label}: ${objects.map(id).join(', ')}`);
  for (const o of objects) validateSchema(o, `${label}: ${id(o)}`);
  return objects;
}
function sameObjects(rendered, expected, label) {
  const key = (o) => `${o.kind}/${o.metadata.name}`;
  const a = rendered.map(key).sort();
  const b = expected.map(key).sort();
  check(JSON.stringify(a) === JSON.stringify(b), label,
        `renders [${a.join(', ')}], the files it names hold [${b.join(', ')}]`);
}

const kustomization =
  yaml.load(fs.readFileSync(path.join(manifestsDir, 'kustomization.yaml'), 'utf8'));
const base = render(manifestsDir, 'kubectl kustomize deploy/kubernetes');
if (base) {
  const listed = (kustomization.resources || []).flatMap(
    (r) => objectFiles.get(path.join(manifestsDir, r)) || []);
  sameObjects(base, listed, 'kubectl kustomize deploy/kubernetes');
  consistent(base, 'kubectl kustomize deploy/kubernetes', { pd: false, redis: false });
}

// Every optional part uncommented in a copy, as an operator enables them: the ServiceMonitor and
// the components. Components need kustomize 3.7 (kubectl 1.21); older kubectl renders only the
// base, and the optional objects were checked from their files above.
if (kubectlMinor >= 21) {
  const copy = path.join(tempDir('kvgate-manifests-'), 'kubernetes');
  fs.cpSync(manifestsDir, copy, { recursive: true });
  const k = path.join(copy, 'kustomization.yaml');
  const text = fs.readFileSync(k, 'utf8')
    .replace(/^(\s*)# (- [\w.-]+\.yaml)\s*$/gm, '$1$2')
    .replace(/^# (components:)\s*$/gm, '$1')
    .replace(/^# (\s+- components\/[\w-]+)\s*$/gm, '$1');
  fs.writeFileSync(k, text);
  const label = 'kubectl kustomize (every optional part)';
  const all = render(copy, label);
  if (all) {
    sameObjects(all, [...objectFiles.values()].flat(), label);
    consistent(all, label, { pd: true, redis: true });
  }
} else {
  console.log(`kubectl 1.${kubectlMinor}'s kustomize predates components: ` +
              'only the base kustomization is rendered');
}

// --- consistency of one render ---
function consistent(objects, label, want) {
  try {
    consistentOrThrow(objects, label, want);
  } catch (e) {
    check(false, label, `an object is malformed where the checks read it: ${e.message}`);
  }
}
function consistentOrThrow(objects, label, want) {
  const find = (kind, name) => objects.find((o) => o.kind === kind && o.metadata.name === name);
  const where = (o) => `${label}: ${id(o)}`;
  const matches = (selector, labels) =>
    selector && Object.keys(selector).length > 0 &&
    Object.entries(selector).every(([k, v]) => labels && labels[k] === v);

  for (const d of objects.filter((o) => o.kind === 'Deployment')) hardened(d, where(d));

  const dep = find('Deployment', 'kvgate');
  if (!check(dep, label, 'no Deployment kvgate')) return;
  const w = where(dep);
  const pod = dep.spec.template;
  const c = (pod.spec.containers || []).find((x) => x.name === 'kvgate');
  if (!check(c, w, 'no container named kvgate')) return;
  check(dep.spec.replicas >= 2, w, `replicas ${dep.spec.replicas}: at least 2`);
  check(matches(dep.spec.selector?.matchLabels, pod.metadata.labels), w,
        'the selector does not match the pod labels');
  check(!matches({ app: 'sglang' }, pod.metadata.labels), w,
        'the gateway pods carry the workers\' label app=sglang');
  check(c.image === 'kvgate:latest' && c.imagePullPolicy === 'IfNotPresent', w,
        'image kvgate:latest, imagePullPolicy IfNotPresent');

  // Ports and probes.
  const ports = new Map((c.ports || []).map((p) => [p.name, p.containerPort]));
  check(ports.has('http') && ports.has('metrics'), w, 'container ports named http and metrics');
  const args = c.args || [];
  // A flag's value, as --name=value or --name value; '' for a bare flag, undefined if absent.
  const flag = (name) => {
    const i = args.findIndex((x) => x === `--${name}` || x.startsWith(`--${name}=`));
    if (i < 0) return undefined;
    if (args[i].includes('=')) return args[i].slice(name.length + 3);
    return i + 1 < args.length && !args[i + 1].startsWith('-') ? args[i + 1] : '';
  };
  check(Number(flag('port')) === ports.get('http'), w, `--port ${flag('port')} is not port http`);
  check(Number(flag('prometheus-port')) === ports.get('metrics'), w,
        `--prometheus-port ${flag('prometheus-port')} is not port metrics`);
  const probe = (name, p, wantPath) => {
    const g = p && p.httpGet;
    check(g && g.path === wantPath && (g.port === 'http' || g.port === ports.get('http')), w,
          `${name} must GET ${wantPath} on the port named http` +
          (g ? ` (it has ${g.path} on ${g.port})` : ''));
  };
  probe('readinessProbe', c.readinessProbe, '/readiness');
  // /health is /readiness with a summary: 503 with no routable worker, which would restart
  // every replica while the fleet is down. Liveness asks whether the process serves.
  probe('livenessProbe', c.livenessProbe, '/liveness');
  if (c.startupProbe) probe('startupProbe', c.startupProbe, '/liveness');

  // Drain: the grace period covers the preStop wait, kvgate's own drain, and a margin.
  const pre = c.lifecycle?.preStop;
  const preSecs = pre?.sleep ? pre.sleep.seconds
    : /sleep$/.test(pre?.exec?.command?.[0] ?? '') ? Number(pre.exec.command[1]) : NaN;
  const drain = Number(flag('shutdown-grace-period-secs'));
  const grace = pod.spec.terminationGracePeriodSeconds;
  check(Number.isFinite(preSecs) && preSecs > 0, w, 'a preStop hook that waits');
  check(Number.isFinite(drain), w, '--shutdown-grace-period-secs set explicitly');
  check(grace >= preSecs + drain + 5, w,
        `terminationGracePeriodSeconds ${grace} < preStop ${preSecs} + drain ${drain} + 5`);

  // Every flag is kvgate's; every $(VAR) is defined in the container's env.
  const env = new Set((c.env || []).map((e) => e.name));
  for (const a of args) {
    if (a.startsWith('--')) {
      const name = a.slice(2).split('=')[0];
      check(knownFlags.has(name), w,
            `--${name} is not a flag of ${kvgateBinary} (kvgate --help)`);
    }
    for (const m of a.matchAll(/\$\((\w+)\)/g)) {
      check(env.has(m[1]), w, `${a} names $(${m[1]}), which the container's env lacks`);
    }
  }
  check(!c.command || path.basename(c.command[0]) === 'kvgate', w,
        'the command is kvgate (the image\'s entrypoint when none is given)');

  // Discovery, plain or prefill/decode.
  if (want.pd) {
    check(flag('pd-disaggregation') === '' && flag('selector') === undefined &&
          flag('prefill-selector') === 'app=sglang,role=prefill' &&
          flag('decode-selector') === 'app=sglang,role=decode', w,
          'PD: --pd-disaggregation, --prefill-selector app=sglang,role=prefill and ' +
          '--decode-selector app=sglang,role=decode instead of --selector');
  } else {
    check(flag('selector') === 'app=sglang' && flag('pd-disaggregation') === undefined, w,
          '--selector=app=sglang without --pd-disaggregation');
  }
  check(flag('service-discovery') === '' && flag('service-discovery-port') === '8000', w,
        '--service-discovery with --service-discovery-port=8000');

  // The Secret holds every key a required reference names.
  const secretRefs = objects.filter((o) => o.kind === 'Deployment')
    .flatMap((d) => d.spec.template.spec.containers.flatMap((x) => x.env || []))
    .map((e) => e.valueFrom?.secretKeyRef).filter((r) => r && !r.optional);
  for (const r of new Map(secretRefs.map((x) => [`${x.name}/${x.key}`, x])).values()) {
    const s = find('Secret', r.name);
    check(s && (r.key in (s.stringData || {}) || r.key in (s.data || {})), label,
          `Secret ${r.name} lacks key ${r.key}`);
  }
  const apiKey = (c.env || []).find((e) => e.name === 'KVGATE_API_KEY');
  check(apiKey?.valueFrom?.secretKeyRef && !apiKey.valueFrom.secretKeyRef.optional, w,
        'KVGATE_API_KEY from the Secret');

  // RBAC: pods get/list/watch, bound to the pods' ServiceAccount in its namespace.
  const sa = find('ServiceAccount', pod.spec.serviceAccountName);
  check(sa, w, `no ServiceAccount ${pod.spec.serviceAccountName}`);
  const role = find('Role', 'kvgate');
  const rule = (role?.rules || []).find(
    (r) => r.apiGroups?.includes('') && r.resources?.includes('pods'));
  check(['get', 'list', 'watch'].every((v) => rule?.verbs?.includes(v)), label,
        'Role kvgate grants get, list and watch on pods');
  const binding = find('RoleBinding', 'kvgate');
  check(binding?.roleRef?.kind === 'Role' && binding.roleRef.name === 'kvgate' &&
        sa && (binding.subjects || []).some((s) => s.kind === 'ServiceAccount' &&
          s.name === sa.metadata.name && s.namespace === sa.metadata.namespace), label,
        'RoleBinding kvgate binds Role kvgate to the pods\' ServiceAccount in its namespace');

  // The Service and the PodDisruptionBudget select the pods; the Service's ports are theirs.
  const svc = find('Service', 'kvgate');
  if (check(svc, label, 'no Service kvgate')) {
    check(svc.spec.type === undefined || svc.spec.type === 'ClusterIP', where(svc), 'ClusterIP');
    check(matches(svc.spec.selector, pod.metadata.labels), where(svc),
          'its selector does not match the Deployment\'s pod labels');
    for (const [name, number] of [['http', 8000], ['metrics', ports.get('metrics')]]) {
      const p = (svc.spec.ports || []).find((x) => x.name === name);
      check(p?.port === number && (p.targetPort === name || p.targetPort === ports.get(name)),
            where(svc), `port ${name} ${number} to the container's port ${name}`);
    }
  }
  const pdb = find('PodDisruptionBudget', 'kvgate');
  check(pdb?.spec?.minAvailable === 1 &&
        matches(pdb.spec.selector?.matchLabels, pod.metadata.labels),
        label, 'PodDisruptionBudget kvgate: minAvailable 1 over the Deployment\'s pods');

  const monitor = find('ServiceMonitor', 'kvgate');
  if (monitor) {
    check(svc && matches(monitor.spec.selector?.matchLabels, svc.metadata.labels) &&
          (monitor.spec.endpoints || []).every(
            (e) => (svc.spec.ports || []).some((p) => p.name === e.port)),
          where(monitor), 'selects Service kvgate and scrapes a port it has');
  }

  // State sync: --state-sync names a Service of the render, on its port.
  const sync = flag('state-sync');
  check(want.redis === (sync !== undefined), w,
        want.redis ? 'no --state-sync' : 'unexpected --state-sync');
  if (sync !== undefined) {
    const m = /^redis:\/\/([^:/]+):(\d+)$/.exec(sync);
    const target = m && find('Service', m[1]);
    check((target?.spec?.ports || []).some((p) => p.port === Number(m[2])), w,
          `--state-sync=${sync} names no Service port of the render`);
    check(env.has('KVGATE_STATE_SYNC_PASSWORD'), w,
          'the Redis password in KVGATE_STATE_SYNC_PASSWORD');
  }
}

// Every container: non-root, read-only, no capabilities, the runtime's seccomp profile, bounded.
function hardened(d, where) {
  const spec = d.spec.template.spec;
  const pod = spec.securityContext || {};
  for (const c of spec.containers) {
    const sc = c.securityContext || {};
    const w = `${where}: container ${c.name}`;
    check((sc.runAsNonRoot ?? pod.runAsNonRoot) === true, w, 'runAsNonRoot');
    check(sc.readOnlyRootFilesystem === true, w, 'readOnlyRootFilesystem');
    check(sc.allowPrivilegeEscalation === false, w, 'allowPrivilegeEscalation false');
    check(sc.capabilities?.drop?.includes('ALL'), w, 'capabilities drop ALL');
    check((sc.seccompProfile || pod.seccompProfile)?.type === 'RuntimeDefault', w,
          'seccompProfile RuntimeDefault');
    const r = c.resources || {};
    check(r.requests?.cpu && r.requests.memory && r.limits?.memory, w,
          'resources: cpu and memory requests, a memory limit');
  }
}

for (const f of failures) console.log(`FAIL ${f}`);
console.log(`manifests: ${passed} passed, ${failures.length} failed`);
process.exit(failures.length === 0 ? 0 : 1);
