#!/usr/bin/env bash
# The live dashboard (GET /dashboard) in a real browser: headless Chromium loads the page from a
# gateway routing to three kvgate-mock workers, one of them stopped, and the DOM it renders must
# show live figures, a row per worker and the stopped one marked down. Then a screenshot at a
# laptop's 1366x768, kept in BUILD_DIR/test-artifacts/dashboard.png for a person to look at.
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
# Quick probes: the stopped worker leaves the rotation in about a second.
kvg_start_gateway cache_aware --health-check-interval-secs 0.3 --health-check-timeout-secs 1 \
  --health-failure-threshold 2 || exit 1
kvg_wait_routable 3 30 || exit 1

complete() {  # prompt: one completion through the gateway
  curl -sf --max-time 10 -H 'content-type: application/json' \
    -d "{\"model\":\"mock-8b\",\"prompt\":\"$1\",\"max_tokens\":4}" \
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

# The dashboard's figures cover the last seconds: traffic keeps flowing while the browser looks.
(
  i=0
  while :; do
    complete "$(prompt "$((i % 10 + 1))")"
    i=$((i + 1))
    sleep 0.2
  done
) &
KVG_PIDS+=("$!")

kill -TERM "$doomed_pid"
kvg_poll 10 bash -c "! kill -0 $doomed_pid 2>/dev/null" || kill -KILL "$doomed_pid"
doomed_out() {
  curl -sf --max-time 2 "$KVG_GATEWAY_URL/workers" | "$KVG_PY" -c 'import json, sys
workers = json.load(sys.stdin)["workers"]
sys.exit(not any(w["url"] == sys.argv[1] and not w["routable"] for w in workers))' "$doomed"
}
kvg_poll 30 doomed_out || fail "the gateway still routes to the stopped worker $doomed after 30 s"

curl -sf --max-time 5 "$KVG_GATEWAY_URL/dashboard/state" -o "$work/state.json" ||
  fail "GET /dashboard/state did not answer 200"
cat >"$work/check_state.py" <<'PY'
import json, sys
path, doomed, staying = sys.argv[1], sys.argv[2], sys.argv[3:]
try:
    s = json.load(open(path))
except ValueError as e:
    sys.exit(f"not JSON ({e}): {open(path).read()[:300]}")
urls = {w.get("url"): w for w in s.get("workers", [])}
if sorted(urls) != sorted(staying + [doomed]):
    sys.exit(f"workers {sorted(urls)}, expected {sorted(staying + [doomed])}")
if urls[doomed].get("routable") is not False:
    sys.exit(f"the stopped worker is routable: {urls[doomed]}")
print("dashboard_browser_test: state:", json.dumps(s["fleet"]))
PY
"$KVG_PY" "$work/check_state.py" "$work/state.json" "$doomed" "${staying[@]}" ||
  fail "GET /dashboard/state: see above"

browse() {  # chromium flags...: headless, throw-away profile, at most 60 s
  timeout 60 chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --no-first-run --user-data-dir="$work/chromium-profile" --virtual-time-budget=6000 "$@" \
    2>>"$work/chromium.err"
}
browse --dump-dom "$KVG_GATEWAY_URL/dashboard" >"$work/dom.html" ||
  fail "chromium could not load the dashboard: $(tail -5 "$work/chromium.err")"
cat >"$work/check_dom.py" <<'PY'
import re, sys
from html.parser import HTMLParser

path, doomed, staying = sys.argv[1], sys.argv[2], sys.argv[3:]
CARDS = ["requests-per-second", "decision-p99", "hit-ratio", "workers-routable"]
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class Dom(HTMLParser):
    """The body's attributes, the text of the fleet cards, and each worker row's cells."""

    def __init__(self):
        super().__init__()
        self.body, self.cards, self.rows = None, {}, {}
        self.depth, self.open = 0, []  # open captures: (depth, where the text goes)
        self.row = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        if tag in VOID:
            return
        self.depth += 1
        classes = (a.get("class") or "").split()
        if tag == "tr" and "worker" in classes:
            self.row = {"class": classes, "cells": {}, "depth": self.depth}
            self.rows[a.get("data-url")] = self.row
        if a.get("id") in CARDS:
            self.cards[a["id"]] = []
            self.open.append((self.depth, self.cards[a["id"]]))
        if tag == "td" and self.row is not None and a.get("data-field"):
            self.row["cells"][a["data-field"]] = []
            self.open.append((self.depth, self.row["cells"][a["data-field"]]))

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        self.open = [(d, out) for d, out in self.open if d < self.depth]
        if self.row is not None and self.row["depth"] == self.depth:
            self.row = None
        self.depth -= 1

    def handle_data(self, data):
        for _, out in self.open:
            out.append(data)


html = open(path, encoding="utf-8").read()
dom = Dom()
dom.feed(html)


def text(parts):
    return "".join(parts).strip()


problems = []
if dom.body is None or not (dom.body.get("data-updated") or "").isdigit():
    problems.append(f"<body> has no data-updated (no live render): {dom.body}")
elif "stale" in (dom.body.get("class") or "").split():
    problems.append("the page shows its last figures as stale (a poll failed)")
for url in staying + [doomed]:
    if url not in dom.rows:
        problems.append(f"no tr.worker row for {url}")
if doomed in dom.rows and "down" not in dom.rows[doomed]["class"]:
    problems.append(f"the stopped worker's row is not marked down: {dom.rows[doomed]}")
count, percent = r"\d[\d,]*", r"\d+(\.\d+)?%"
patterns = {"in_flight": count, "index_blocks": count, "decision_share": percent}
for url in staying:
    row = dom.rows.get(url)
    if row is None:
        continue
    if "down" in row["class"]:
        problems.append(f"the live worker {url} is marked down")
    for field, pattern in patterns.items():
        value = text(row["cells"].get(field, []))
        if not re.fullmatch(pattern, value):
            problems.append(f"{url}: {field} is {value!r}, not a number")
for card in CARDS:
    value = text(dom.cards.get(card, []))
    if value in ("", "\u2013") or "null" in value or "NaN" in value:
        problems.append(f"fleet card #{card} is not filled: {value!r}")
routable = text(dom.cards.get("workers-routable", []))
if not re.fullmatch(r"2\s*/\s*3", routable):
    problems.append(f"#workers-routable reads {routable!r}, not 2/3")
if problems:
    print("\n".join(problems))
    print("found: body", dom.body, "cards", {k: text(v) for k, v in dom.cards.items()})
    for url, row in dom.rows.items():
        print("found: row", url, row["class"], {k: text(v) for k, v in row["cells"].items()})
    sys.exit(1)
PY
"$KVG_PY" "$work/check_dom.py" "$work/dom.html" "$doomed" "${staying[@]}" ||
  fail "the rendered dashboard: see above"

shot="$build/test-artifacts/dashboard.png"
mkdir -p "$(dirname "$shot")" || fail "cannot create $(dirname "$shot")"
rm -f "$shot"
browse --hide-scrollbars --window-size=1366,768 --screenshot="$shot" "$KVG_GATEWAY_URL/dashboard" \
  >/dev/null || fail "chromium could not take a screenshot: $(tail -5 "$work/chromium.err")"
size="$(stat -c %s "$shot" 2>/dev/null || echo 0)"
((size > 10240)) || fail "the screenshot $shot is missing or too small ($size bytes)"
echo "dashboard screenshot: $shot"

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
