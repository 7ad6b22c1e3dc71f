#!/usr/bin/env bash
# The live dashboard (GET /dashboard) in a real browser: headless Chromium loads the page from a
# gateway routing to three kvgate-mock workers, one of them stopped, after real traffic (plain and
# streamed completions, two refused requests, one request that waited in the admission queue).
# The DOM it renders must show live figures, a row per worker with the stopped one marked down
# and dead (unhealthy, no agreement figure), the errors, latency, tokens and admission panels
# filled, and every card, sparkline and panel labelled with its window; at 800 px the workers'
# names must still tell them apart. Screenshots at a laptop's 1366x768 and at 800 px are kept in
# BUILD_DIR/test-artifacts/dashboard-*.png for a person to look at.
# Last, the tenants panel: a gateway with a keys file serves traffic of two tenants, and its own
# page and dashboard state (fetched with a key, served as files: the browser holds no key) must
# render a row per tenant with its requests by class and the admission queue by class.
#   bash tests/app/dashboard_browser_test.sh BUILD_DIR
set -uo pipefail
build="${1:?usage: dashboard_browser_test.sh BUILD_DIR}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
KVG_NAME=dashboard_browser_test
# shellcheck source=../../tools/replay/fleet.sh
source "$here/tools/replay/fleet.sh"
work="$(mktemp -d)"
kvg_init "$build" "$work"
trap 'kvg_stop_all; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
fail() { echo "dashboard_browser_test: FAIL: $*" >&2; exit 1; }

kvg_need kvgate kvgate-mock || exit 1
command -v chromium >/dev/null || fail "chromium is missing (tools/setup.sh installs it)"

# Two mock processes, so one worker can be stopped alone: two workers that stay, one that goes.
kvg_start_mock 2 || exit 1
read -ra staying <<<"$KVG_WORKER_URLS"
kvg_start_mock 1 || exit 1
doomed="$KVG_WORKER_URLS"
doomed_pid="$KVG_MOCK_PID"
KVG_WORKER_URLS="${staying[*]} $doomed"
# Quick probes: the stopped worker leaves the rotation in about a second. One request runs at a
# time, so a long stream makes the next request wait in the admission queue.
kvg_start_gateway cache_aware --health-check-interval-secs 0.3 --health-check-timeout-secs 1 \
  --health-failure-threshold 2 --max-concurrent-requests 1 || exit 1
kvg_wait_routable 3 30 || exit 1

complete() {  # prompt [stream]: one completion through the gateway
  curl -sf --max-time 30 -H 'content-type: application/json' \
    -d "{\"model\":\"mock-8b\",\"prompt\":\"$1\",\"max_tokens\":4,\"stream\":${2:-false}}" \
    "$KVG_GATEWAY_URL/v1/completions" -o /dev/null
}
prompt() { printf 'conversation %s: %s' "$1" "$(printf 'word%d ' $(seq 1 100))"; }
# Ten conversations, each sent three times: the repeats find their blocks cached (hits).
for round in 1 2 3; do
  for i in $(seq 1 10); do
    complete "$(prompt "$i")" ||
      fail "completion $i (round $round) failed: $(tail -3 "$work/gateway.err")"
  done
done

# The dashboard's figures cover the last seconds: traffic keeps flowing while the browser looks,
# every other request streamed (first-token times are measured on streams).
(
  i=0
  while :; do
    complete "$(prompt "$((i % 10 + 1))")" "$( ((i % 2)) && echo false || echo true)"
    i=$((i + 1))
    sleep 0.2
  done
) &
KVG_PIDS+=("$!")

kill -TERM "$doomed_pid"
kvg_poll 10 bash -c "! kill -0 $doomed_pid 2>/dev/null" || kill -KILL "$doomed_pid"
doomed_unhealthy() {
  curl -sf --max-time 2 "$KVG_GATEWAY_URL/workers" | "$KVG_PY" -c 'import json, sys
workers = json.load(sys.stdin)["workers"]
sys.exit(not any(w["url"] == sys.argv[1] and not w["routable"] and w["health"] == "unhealthy"
                 for w in workers))' "$doomed"
}
kvg_poll 30 doomed_unhealthy ||
  fail "the gateway does not report the stopped worker $doomed unhealthy after 30 s"

state() {  # file: GET /dashboard/state into file
  curl -sf --max-time 5 "$KVG_GATEWAY_URL/dashboard/state" -o "$1"
}
state_says() {  # python expression over s, the state: true when it holds now
  state "$work/poll.json" && "$KVG_PY" -c 'import json, sys
s = json.load(open(sys.argv[1]))
sys.exit(not eval(sys.argv[2]))' "$work/poll.json" "$1"
}
# Errors: a model nobody serves (404) and a body that is not JSON (400).
curl -s --max-time 10 -o /dev/null -H 'content-type: application/json' \
  -d '{"model":"no-such-model","prompt":"hello","max_tokens":4}' "$KVG_GATEWAY_URL/v1/completions"
curl -s --max-time 10 -o /dev/null -H 'content-type: application/json' -d '{"model":' \
  "$KVG_GATEWAY_URL/v1/completions"
# A long stream holds the one slot; a request sent while it runs waits for it.
curl -sfN --max-time 60 -H 'content-type: application/json' \
  -d '{"model":"mock-8b","prompt":"a long answer","max_tokens":800,"stream":true}' \
  "$KVG_GATEWAY_URL/v1/completions" -o "$work/long.sse" &
KVG_PIDS+=("$!")
kvg_poll 20 test -s "$work/long.sse" || fail "the long stream sent nothing within 20 s"
complete "$(prompt 1)" &
KVG_PIDS+=("$!")
kvg_poll 20 state_says 's["admission"]["waited"] >= 1' ||
  fail "no request waited in the admission queue: $(cat "$work/poll.json")"
kvg_poll 20 state_says 's["errors"]["count"] >= 2 and s["latency"]["ttft_ms"]["count"] >= 1' ||
  fail "the errors or first tokens are not counted: $(cat "$work/poll.json")"

state "$work/state.json" || fail "GET /dashboard/state did not answer 200"
cat >"$work/check_state.py" <<'PY'
import json, sys
path, doomed, staying = sys.argv[1], sys.argv[2], sys.argv[3:]
try:
    s = json.load(open(path))
except ValueError as e:
    sys.exit(f"not JSON ({e}): {open(path).read()[:300]}")
problems = []
urls = {w.get("url"): w for w in s.get("workers", [])}
if sorted(urls) != sorted(staying + [doomed]):
    sys.exit(f"workers {sorted(urls)}, expected {sorted(staying + [doomed])}")
dead = urls[doomed]
if dead.get("routable") is not False or dead.get("health") != "unhealthy":
    problems.append(f"the stopped worker is not shown unhealthy: {dead}")
if dead["cached_tokens"].get("agreement") is not None:
    problems.append(f"the stopped worker has an agreement: {dead['cached_tokens']}")
e = s["errors"]
reasons = {r["reason"]: r["count"] for r in e["by_reason"]}
if not (reasons.get("unknown_model", 0) >= 1 and reasons.get("bad_request", 0) >= 1):
    problems.append(f"errors by reason: {e['by_reason']}")
fours = [c for c in e["answered_by_status_class"] if c["status_class"] == "4xx"]
if not fours or fours[0]["count"] < 2 or not fours[0]["per_second"] > 0:
    problems.append(f"answers by status class: {e['answered_by_status_class']}")
if not 0 < e["window_seconds"] <= 61:
    problems.append(f"errors window: {e['window_seconds']}")
for name in ("ttft_ms", "end_to_end_ms"):
    p = s["latency"][name]
    if not (p["count"] >= 1 and p["p50"] is not None and 0 < p["p50"] <= p["p90"] <= p["p99"]):
        problems.append(f"latency {name}: {p}")
t = s["tokens"]
if not (t["prompt_per_second"] > 0 and t["completion_per_second"] > 0):
    problems.append(f"tokens: {t}")
a = s["admission"]
classes = {"critical", "standard", "sheddable"}
if not (a["enabled"] and a["waited"] >= 1 and set(a["queued_by_class"]) == classes):
    problems.append(f"admission: {a}")
if not 0 < s["fleet"]["window_seconds"] <= 11:
    problems.append(f"the cards' window: {s['fleet']['window_seconds']}")
if problems:
    print("\n".join(problems))
    sys.exit(1)
shown = {k: s[k] for k in ("fleet", "errors", "latency", "tokens", "admission")}
print("dashboard_browser_test: state:", json.dumps(shown))
PY
"$KVG_PY" "$work/check_state.py" "$work/state.json" "$doomed" "${staying[@]}" ||
  fail "GET /dashboard/state: see above"

browse() {  # chromium flags...: headless, throw-away profile, at most 60 s
  timeout 60 chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --no-first-run --user-data-dir="$work/chromium-profile" --virtual-time-budget=6000 "$@" \
    2>>"$work/chromium.err"
}
cat >"$work/dom.py" <<'PY'
"""The rendered page as a tree of nodes, for the checks to query."""
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.children = tag, dict(attrs), parent, []
        self.classes = (self.attrs.get("class") or "").split()

    def text(self):
        return "".join(c if isinstance(c, str) else c.text() for c in self.children).strip()

    def walk(self):
        for c in self.children:
            if isinstance(c, Node):
                yield c
                yield from c.walk()

    def find(self, pred):
        return [n for n in self.walk() if pred(n)]


class Tree(HTMLParser):
    def __init__(self, html):
        super().__init__()
        self.root = self.at = Node("#root", [], None)
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        node = Node(tag, attrs, self.at)
        self.at.children.append(node)
        if tag not in VOID:
            self.at = node

    def handle_endtag(self, tag):
        n = self.at
        while n is not None and n.tag != tag:
            n = n.parent
        if n is not None and n.parent is not None:
            self.at = n.parent

    def handle_data(self, data):
        self.at.children.append(data)


def load(path):
    """The tree's root, and its elements by id."""
    root = Tree(open(path, encoding="utf-8").read()).root
    return root, {n.attrs["id"]: n for n in root.walk() if "id" in n.attrs}


def worker_rows(root):
    """tr.worker by data-url: (the row, its cells by data-field)."""
    rows = {}
    for tr in root.find(lambda n: n.tag == "tr" and "worker" in n.classes):
        cells = {td.attrs["data-field"]: td for td in tr.find(lambda n: "data-field" in n.attrs)}
        rows[tr.attrs.get("data-url")] = (tr, cells)
    return rows
PY
# The page at a laptop's width, then at 800 px, where the worker names must still differ.
browse --window-size=1366,768 --dump-dom "$KVG_GATEWAY_URL/dashboard" >"$work/dom.html" ||
  fail "chromium could not load the dashboard: $(tail -5 "$work/chromium.err")"
browse --window-size=800,900 --dump-dom "$KVG_GATEWAY_URL/dashboard" >"$work/dom800.html" ||
  fail "chromium could not load the dashboard at 800 px: $(tail -5 "$work/chromium.err")"
cat >"$work/check_dom.py" <<'PY'
import re, sys
sys.path.insert(0, sys.argv[1])
import dom

path, doomed, staying = sys.argv[2], sys.argv[3], sys.argv[4:]
root, ids = dom.load(path)
rows = dom.worker_rows(root)
body = root.find(lambda n: n.tag == "body")[0]
NONE = "\u2014"  # what the page shows where it has no figure
problems = []


def text(node_id):
    return ids[node_id].text() if node_id in ids else None


def number(node_id):
    """The element's text as a number, or None."""
    t = (text(node_id) or "").replace(",", "")
    return float(t) if re.fullmatch(r"\d+(\.\d+)?", t) else None


if not (body.attrs.get("data-updated") or "").isdigit():
    problems.append(f"<body> has no data-updated (no live render): {body.attrs}")
elif "stale" in body.classes:
    problems.append("the page shows its last figures as stale (a poll failed)")

# The fleet cards and the worker rows.
for card in ["requests-per-second", "decision-p99", "hit-ratio", "workers-routable"]:
    value = text(card)
    if value in (None, "", NONE) or "null" in value or "NaN" in value:
        problems.append(f"fleet card #{card} is not filled: {value!r}")
if not re.fullmatch(r"2\s*/\s*3", text("workers-routable") or ""):
    problems.append(f"#workers-routable reads {text('workers-routable')!r}, not 2/3")
for url in staying + [doomed]:
    if url not in rows:
        problems.append(f"no tr.worker row for {url}")
patterns = {"in_flight": r"\d[\d,]*", "index_blocks": r"\d[\d,]*", "decision_share": r"\d+(\.\d+)?%"}
for url in staying:
    tr, cells = rows.get(url, (None, {}))
    if tr is not None and "down" in tr.classes:
        problems.append(f"the live worker {url} is marked down")
    for field, pattern in patterns.items():
        value = cells[field].text() if field in cells else None
        if not re.fullmatch(pattern, value or ""):
            problems.append(f"{url}: {field} is {value!r}, not a number")

# The stopped worker: marked, its state as the gateway knows it, no agreement figure.
if doomed in rows:
    tr, cells = rows[doomed]
    if not {"down", "dead"} <= set(tr.classes):
        problems.append(f"the stopped worker's row is not marked down and dead: {tr.classes}")
    said = {f: cells[f].text() if f in cells else None
            for f in ("worker", "health", "circuit_breaker", "agreement")}
    if said["health"] != "unhealthy" or "unhealthy" not in (said["worker"] or ""):
        problems.append(f"the stopped worker's row does not say unhealthy: {said}")
    if said["agreement"] != NONE:
        problems.append(f"the stopped worker's agreement reads {said['agreement']!r}, not {NONE}")

# Every card, sparkline and panel says its window.
windows = {n.attrs["data-window-for"]: n.text() for n in root.find(
    lambda n: "data-window-for" in n.attrs)}
cards = [c for c in root.find(lambda n: "card" in n.classes)]
for c in cards:
    if not any(n.text() for n in c.find(lambda n: "window" in n.classes)):
        problems.append(f"a card without a window label: {c.text()[:60]!r}")


def seconds(label, pattern):
    m = re.fullmatch(pattern, label or "")
    return int(m.group(1)) if m else None


tile = None
for key in ["requests-per-second", "decision", "hit-ratio", "apply-lag", "decision-share"]:
    tile = seconds(windows.get(key), r"last (\d+) s")
    if tile is None or not 1 <= tile <= 10:
        problems.append(f"the {key} card's window reads {windows.get(key)!r}")
for key, want in [("event-gaps", "since start"), ("degraded-ranks", "now"),
                  ("workers-routable", "now"), ("state", "now")]:
    if windows.get(key) != want:
        problems.append(f"the {key} card's window reads {windows.get(key)!r}, not {want!r}")
for spark in ["spark-rps", "spark-hit", "spark-p99"]:
    if not re.fullmatch(r"per second, last \d+ (s|min)", windows.get(spark) or ""):
        problems.append(f"the {spark} sparkline's window reads {windows.get(spark)!r}")
    if windows.get(spark + "-now") != "last 1 s":
        problems.append(f"the {spark} newest point's window reads {windows.get(spark + '-now')!r}")
for panel in ["errors-panel", "latency-panel", "tokens-panel"]:
    n = seconds(windows.get(panel), r"last (\d+) s")
    if n is None or not 1 <= n <= 60 or (tile is not None and n < tile):
        problems.append(f"the {panel} window reads {windows.get(panel)!r}")
if not re.fullmatch(r"now; events last \d+ s", windows.get("admission-panel") or ""):
    problems.append(f"the admission panel's window reads {windows.get('admission-panel')!r}")

# The panels, after real traffic.
for panel in ["errors-panel", "latency-panel", "tokens-panel", "admission-panel"]:
    if panel not in ids:
        problems.append(f"no #{panel}")
if not re.fullmatch(r"\d+ in the window", text("errors-count") or "") or \
        int((text("errors-count") or "0 ").split()[0]) < 2:
    problems.append(f"#errors-count reads {text('errors-count')!r}")
if (number("status-4xx") or 0) < 2:
    problems.append(f"#status-4xx reads {text('status-4xx')!r}")
reasons = {tr.attrs.get("data-reason") for tr in root.find(
    lambda n: n.tag == "tr" and "error-reason" in n.classes)}
if not {"unknown_model", "bad_request"} <= reasons:
    problems.append(f"the errors by reason are {reasons}")
for kind in ["ttft", "e2e"]:
    qs = [number(f"{kind}-{q}") for q in ("p50", "p90", "p99")]
    if None in qs or not 0 < qs[0] <= qs[1] <= qs[2] or not (number(f"{kind}-count") or 0) >= 1:
        problems.append(f"{kind} percentiles read {qs}, count {text(kind + '-count')!r}")
for t in ["prompt-tokens-per-second", "completion-tokens-per-second"]:
    if not (number(t) or 0) > 0:
        problems.append(f"#{t} reads {text(t)!r}")
for a in ["admission-queued", "admission-running", "admission-queued-critical",
          "admission-queued-standard", "admission-queued-sheddable", "admission-shed"]:
    if number(a) is None:
        problems.append(f"#{a} reads {text(a)!r}")
if (number("admission-waited") or 0) < 1:
    problems.append(f"#admission-waited reads {text('admission-waited')!r}")
if not ids.get("admission-off") or "hidden" not in ids["admission-off"].attrs:
    problems.append("the admission panel says the queue is off")

if problems:
    print("\n".join(problems))
    print("found: windows", windows)
    for url, (tr, cells) in rows.items():
        print("found: row", url, tr.classes, {k: v.text() for k, v in cells.items()})
    sys.exit(1)
PY
"$KVG_PY" "$work/check_dom.py" "$work" "$work/dom.html" "$doomed" "${staying[@]}" ||
  fail "the rendered dashboard: see above"
cat >"$work/check_names.py" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import dom

root, _ = dom.load(sys.argv[2])
urls = sys.argv[3:]
shown = {}
for url, (tr, cells) in dom.worker_rows(root).items():
    names = cells["worker"].find(lambda n: "u" in n.classes) if "worker" in cells else []
    if not names or names[0].attrs.get("title") != url:
        sys.exit(f"{url}: no name whose title is the whole URL")
    shown[url] = names[0].text()
problems = []
if sorted(shown) != sorted(urls):
    problems.append(f"rows for {sorted(shown)}, expected {sorted(urls)}")
if len(set(shown.values())) != len(shown):
    problems.append(f"at 800 px two workers show the same name: {shown}")
for url, name in shown.items():
    if name.startswith("http") or "\u2026" not in name and not url.endswith(name):
        problems.append(f"{url} shows as {name!r}, not its host:port")
if problems:
    sys.exit("\n".join(problems))
print("dashboard_browser_test: names at 800 px:", shown)
PY
"$KVG_PY" "$work/check_names.py" "$work" "$work/dom800.html" "${staying[@]}" "$doomed" ||
  fail "the worker names at 800 px: see above"

for view in 1366,768 800,1400; do
  shot="$build/test-artifacts/dashboard-${view%%,*}.png"
  mkdir -p "$(dirname "$shot")" || fail "cannot create $(dirname "$shot")"
  rm -f "$shot"
  browse --hide-scrollbars --window-size="$view" --screenshot="$shot" \
    "$KVG_GATEWAY_URL/dashboard" >/dev/null ||
    fail "chromium could not take a screenshot: $(tail -5 "$work/chromium.err")"
  size="$(stat -c %s "$shot" 2>/dev/null || echo 0)"
  ((size > 10240)) || fail "the screenshot $shot is missing or too small ($size bytes)"
  echo "dashboard screenshot: $shot"
done

# ---- the tenants panel ----
cat >"$work/keys.yaml" <<'YAML'
keys:
  - {key: sk-team-a, tenant: team-a, priority: standard}
  - {key: sk-batch, tenant: batch, priority: sheddable}
YAML
KVG_WORKER_URLS="${staying[*]}"
KVG_GATEWAY_LOG=tenants kvg_start_gateway cache_aware --api-keys-file "$work/keys.yaml" \
  --max-concurrent-requests 4 || exit 1
as_key() {  # key curl-args...: curl with the key as a Bearer token
  local key="$1"
  shift
  curl -sf --max-time 10 -H "authorization: Bearer $key" "$@"
}
both_routable() {
  as_key sk-team-a "$KVG_GATEWAY_URL/workers" | "$KVG_PY" -c 'import json, sys
sys.exit(sum(w["routable"] for w in json.load(sys.stdin)["workers"]) != 2)'
}
kvg_poll 30 both_routable || fail "the tenants gateway's workers were not routable within 30 s"
for key in sk-team-a sk-team-a sk-team-a sk-batch sk-batch; do
  as_key "$key" -H 'content-type: application/json' \
    -d '{"model":"mock-8b","prompt":"a tenant'"'"'s prompt","max_tokens":4}' \
    "$KVG_GATEWAY_URL/v1/completions" -o /dev/null || fail "a completion with $key failed"
done
mkdir -p "$work/site/dashboard"
counted() {  # the state counts every request (each is counted when it ends)
  as_key sk-team-a "$KVG_GATEWAY_URL/dashboard/state" -o "$work/site/dashboard/state" &&
    "$KVG_PY" -c 'import json, sys
t = {x["tenant"]: x["requests"] for x in json.load(open(sys.argv[1]))["tenants"]}
sys.exit(not (t.get("team-a", {}).get("standard") == 3 and t.get("batch", {}).get("sheddable") == 2))' \
      "$work/site/dashboard/state"
}
kvg_poll 10 counted || fail "dashboard/state never counted the tenants: $(cat "$work/site/dashboard/state")"
as_key sk-team-a "$KVG_GATEWAY_URL/dashboard" -o "$work/site/index.html" || fail "GET /dashboard"
site_port=$("$KVG_PY" -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') || exit 1
(cd "$work/site" && exec "$KVG_PY" -m http.server --bind 127.0.0.1 "$site_port" \
  >"$work/site.log" 2>&1) &
KVG_PIDS+=("$!")
kvg_poll 10 curl -sf -o /dev/null "http://127.0.0.1:$site_port/index.html" ||
  fail "the static copy of the dashboard is not served"
browse --dump-dom "http://127.0.0.1:$site_port/index.html" >"$work/tenants.html" ||
  fail "chromium could not load the tenants panel: $(tail -5 "$work/chromium.err")"
cat >"$work/check_tenants.py" <<'PY'
import sys
from html.parser import HTMLParser


class Dom(HTMLParser):
    """Each tenant row's cells, the panel's hidden flag and the queue line."""

    def __init__(self):
        super().__init__()
        self.rows, self.row, self.field, self.hidden, self.queued = {}, None, None, None, None
        self.in_queued = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id") == "tenants-panel":
            self.hidden = "hidden" in a
        if a.get("id") == "queued":
            self.in_queued, self.queued = True, ""
        if tag == "tr" and "tenant" in (a.get("class") or "").split():
            self.row = self.rows.setdefault(a.get("data-tenant"), {})
        if tag == "td" and self.row is not None:
            self.field = a.get("data-field")
            self.row[self.field] = ""

    def handle_endtag(self, tag):
        if tag == "span":
            self.in_queued = False
        if tag == "td":
            self.field = None
        if tag == "tr":
            self.row = None

    def handle_data(self, data):
        if self.in_queued:
            self.queued += data
        if self.row is not None and self.field:
            self.row[self.field] += data


dom = Dom()
dom.feed(open(sys.argv[1], encoding="utf-8").read())
want = {"team-a": ("requests_standard", "3"), "batch": ("requests_sheddable", "2")}
problems = []
if dom.hidden is not False:
    problems.append("#tenants-panel is hidden or missing")
if not (dom.queued or "").startswith("queued: critical 0"):
    problems.append(f"#queued reads {dom.queued!r}")
for tenant, (field, value) in want.items():
    got = dom.rows.get(tenant, {}).get(field)
    if got != value:
        problems.append(f"tenant {tenant}: {field} is {got!r}, not {value}")
if problems:
    print("\n".join(problems))
    print("found:", dom.rows)
    sys.exit(1)
PY
"$KVG_PY" "$work/check_tenants.py" "$work/tenants.html" || fail "the tenants panel: see above"
echo "dashboard_browser_test: PASS"
