#!/usr/bin/env bash
# Assembles kvgate's container image with buildah, offline, from an existing build: the tree that
# `cmake --install` installs under /opt/kvgate, exactly the shared libraries its binaries link
# (as ldd resolves them, each file with its symlink names), the dynamic loader, and what glibc and
# OpenSSL read at run time (/etc/passwd and /etc/group with the user kvgate, uid 65532; a minimal
# /etc/nsswitch.conf; the CA roots). The same image deploy/image/Dockerfile builds from
# debian:12-slim, without the rest of Debian. Entrypoint /opt/kvgate/bin/kvgate, user 65532,
# ports 8000 and 29000 (run it with --port 8000 --prometheus-port 29000).
#
#   tools/build-image.sh [BUILD_DIR] [--tag kvgate:latest] [--check]
#
#   BUILD_DIR   a built tree (default build/release; relative to the current directory)
#   --tag NAME  the image's name (default kvgate:latest); the image the name held before is removed
#   --check     then check the image (CI runs this):
#               - deploy/image/Dockerfile's runtime package list equals the one derived from the
#                 binaries (ldd, then dpkg -S), and its build packages are all in tools/setup.sh;
#               - `kvgate --version` inside the image prints the build's version;
#               - kvgate serves from inside the image (as uid 65532) in front of a kvgate-mock
#                 worker started on the host on loopback ports: /health answers 200 and a
#                 /v1/completions is answered.
#
# Needs root. Installs buildah (and ca-certificates) with apt-get when missing. Storage is vfs
# (any filesystem, also inside a container) and `buildah run` uses chroot isolation, which shares
# the host's network: the check reaches the gateway on 127.0.0.1. Every working container is
# removed on exit; the tagged image stays in buildah's store:
#   buildah --storage-driver vfs images
#   buildah --storage-driver vfs push kvgate:latest docker://REGISTRY/kvgate:TAG
set -euo pipefail
umask 022

src="$(cd "$(dirname "$0")/.." && pwd)"
build=build/release
tag=kvgate:latest
check=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tag) [[ $# -ge 2 ]] || { echo "build-image: --tag needs a name" >&2; exit 2; }
      tag="$2"; shift 2 ;;
    --tag=*) tag="${1#--tag=}"; shift ;;
    --check) check=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;;
    -*) echo "build-image: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) build="$1"; shift ;;
  esac
done

say() { echo "build-image: $*"; }
die() { echo "build-image: $*" >&2; exit 1; }

[[ -d "$build" ]] || die "no build directory $build (build first: make build)"
build="$(cd "$build" && pwd)"
[[ -f "$build/CMakeCache.txt" && -x "$build/bin/kvgate" ]] ||
  die "$build is not a built tree (no CMakeCache.txt or bin/kvgate; build first: make build)"
[[ $check == 0 || -x "$build/bin/kvgate-mock" ]] || die "--check needs $build/bin/kvgate-mock"
[[ "$(id -u)" == 0 ]] || die "needs root (buildah's storage and its chroot runs)"

# Debian packages this script uses, installed when missing (tools/setup.sh lists them too).
need() {  # command-or-file package
  if [[ "$1" == /* ]]; then [[ -e "$1" ]] && return 0; else command -v "$1" >/dev/null && return 0; fi
  say "installing $2 (for $1)"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -q --no-install-recommends "$2" >/dev/null; then
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends "$2" >/dev/null
  fi
}
need buildah buildah
need /etc/ssl/certs/ca-certificates.crt ca-certificates
if [[ $check == 1 ]]; then
  need curl curl
  need /usr/bin/python3 python3
fi

export STORAGE_DRIVER=vfs BUILDAH_ISOLATION=chroot
bah() { buildah --storage-driver vfs "$@"; }

work="$(mktemp -d /tmp/kvgate-image.XXXXXX)"
containers=()  # working containers made here, removed on exit
pids=()        # processes started here (the mock, the gateway's buildah run), stopped on exit

# Processes started here (the gateway inside the image runs under `buildah run`, as the innermost
# of a chain of buildah processes): SIGTERM to the innermost of each, up to 10 s for all to end,
# then SIGTERM to what is left and, 5 s later, SIGKILL.
descendants() {  # pid: its descendants' pids, the deepest first
  ps -e -o pid=,ppid= | awk -v root="$1" '
    { kids[$2] = kids[$2] " " $1 }
    END {
      n = split(kids[root], q, " ")
      for (i = 1; i <= n; i++) { m = split(kids[q[i]], more, " "); for (j = 1; j <= m; j++) q[++n] = more[j] }
      for (i = n; i >= 1; i--) print q[i]
    }'
}
wait_gone() {  # secs pids...: true when every pid has ended within secs
  local deadline=$((SECONDS + $1)) p
  shift
  for p in "$@"; do
    while kill -0 "$p" 2>/dev/null; do
      ((SECONDS < deadline)) || return 1
      sleep 0.1
    done
  done
}
stop_all() {
  [[ ${#pids[@]} -gt 0 ]] || return 0
  local p inner all=()
  for p in "${pids[@]}"; do
    inner="$(descendants "$p" | head -1)"
    kill -TERM "${inner:-$p}" 2>/dev/null || true
  done
  if ! wait_gone 10 "${pids[@]}"; then
    for p in "${pids[@]}"; do
      # shellcheck disable=SC2207  # pids are words
      all+=($(descendants "$p") "$p")
    done
    kill -TERM "${all[@]}" 2>/dev/null || true
    wait_gone 5 "${all[@]}" || kill -KILL "${all[@]}" 2>/dev/null || true
  fi
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
cleanup() {
  local rc=$?
  stop_all
  local c
  for c in "${containers[@]}"; do
    bah rm "$c" >/dev/null 2>&1 || true
  done
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Polls `cmd...` every 0.1 s until it succeeds or `secs` pass.
poll() {  # secs cmd...
  local secs="$1"
  shift
  local deadline=$((SECONDS + secs))
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

# --- The install tree and the shared libraries it links --------------------------------------

rootfs="$work/rootfs"
mkdir -p "$rootfs"
chmod 755 "$rootfs"
# The host's layout of the library folders: on Debian 12 /lib and /lib64 are links into /usr (the
# binaries name their loader /lib64/ld-linux-x86-64.so.2). The image has no /bin: no shell.
for d in lib lib64; do
  if [[ -L "/$d" ]]; then ln -s "$(readlink "/$d")" "$rootfs/$d"; fi
done
say "installing $build into the image's /opt/kvgate"
# DESTDIR keeps the prefix /opt/kvgate in what the install writes (the systemd unit's ExecStart).
DESTDIR="$rootfs" cmake --install "$build" --prefix /opt/kvgate >"$work/install.log" ||
  { cat "$work/install.log" >&2; die "cmake --install $build failed"; }
elfs=()
for f in "$rootfs"/opt/kvgate/bin/*; do
  [[ -f "$f" && "$(head -c 4 "$f" | od -An -c | tr -d ' ')" == '177ELF' ]] && elfs+=("$f")
done
[[ ${#elfs[@]} -gt 0 ]] || die "the install put no binary in /opt/kvgate/bin"

# What the loader resolves for each binary: one path a line, the loader itself included.
ldd "${elfs[@]}" >"$work/ldd.txt" || die "ldd failed on the installed binaries"
if grep -q "not found" "$work/ldd.txt"; then
  grep "not found" "$work/ldd.txt" | sort -u >&2
  die "a library the binaries link is missing on this machine"
fi
awk '/^[^ \t]/ { next }                         # "FILE:" headers
     $2 == "=>" && $3 ~ /^\// { print $3; next } # name => path (address)
     $1 ~ /^\// { print $1 }' "$work/ldd.txt" | sort -u >"$work/libs.txt"   # the loader

# Copies a host path into the image where the host has it, its symlinks as symlinks, then what
# each link points to, until a regular file.
copy_path() {  # absolute path
  local p="$1" dir target
  while :; do
    dir="$(cd "$(dirname "$p")" && pwd -P)"
    p="$dir/$(basename "$p")"
    mkdir -p "$rootfs$dir"
    [[ -e "$rootfs$p" || -L "$rootfs$p" ]] || cp -a "$p" "$rootfs$p"
    [[ -L "$p" ]] || return 0
    target="$(readlink "$p")"
    [[ "$target" == /* ]] || target="$dir/$target"
    p="$target"
  done
}
while read -r lib; do copy_path "$lib"; done <"$work/libs.txt"
say "$(wc -l <"$work/libs.txt") shared libraries (with the loader) for ${#elfs[@]} binaries"

# What glibc and OpenSSL read at run time. glibc 2.36 has the files and dns NSS sources built in.
mkdir -p "$rootfs/etc/ssl/certs" "$rootfs/usr/lib/ssl" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
cat >"$rootfs/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/usr/sbin/nologin
kvgate:x:65532:65532:kvgate:/nonexistent:/usr/sbin/nologin
EOF
cat >"$rootfs/etc/group" <<'EOF'
root:x:0:
kvgate:x:65532:
EOF
cat >"$rootfs/etc/nsswitch.conf" <<'EOF'
passwd: files
group: files
shadow: files
hosts: files dns
networks: files
protocols: files
services: files
EOF
cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
# Debian's OpenSSL looks in /usr/lib/ssl (OPENSSLDIR) for its default roots.
ln -s /etc/ssl/certs/ca-certificates.crt "$rootfs/usr/lib/ssl/cert.pem"
ln -s /etc/ssl/certs "$rootfs/usr/lib/ssl/certs"

# --- The image ---------------------------------------------------------------------------------

version="$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")"
source_dir="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")"
revision="$(git -C "${source_dir:-$src}" rev-parse HEAD 2>/dev/null || echo unknown)"

ctr="$(bah from --name "kvgate-image-$$" scratch)"
containers+=("$ctr")
bah copy "$ctr" "$rootfs/" / >/dev/null
bah config \
  --entrypoint '["/opt/kvgate/bin/kvgate"]' \
  --user 65532:65532 \
  --workingdir / \
  --env PATH=/opt/kvgate/bin:/usr/bin:/bin \
  --port 8000/tcp --port 29000/tcp \
  --stop-signal SIGTERM \
  --created-by "tools/build-image.sh" \
  --label org.opencontainers.image.title=kvgate \
  --label "org.opencontainers.image.description=Cache-aware inference gateway for LLM fleets" \
  --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.revision=$revision" \
  --label "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  "$ctr"
old_image="$(bah inspect --type image --format '{{.FromImageID}}' "$tag" 2>/dev/null || true)"
image="$(bah commit --quiet --rm "$ctr" "$tag")"
containers=()
if [[ -n "$old_image" && "$old_image" != "$image" ]]; then
  bah rmi "$old_image" >/dev/null 2>&1 || say "the image $tag named before ($old_image) is still in use; kept"
fi
say "committed $tag (${image:0:12}): kvgate $version, revision ${revision:0:12}"

# --- The checks ----------------------------------------------------------------------------------

# The Debian packages owning the libraries the binaries link: dpkg -S on each path, also as the
# other side of /usr (usrmerge: a package may register /lib/... or /usr/lib/...) and resolved.
derive_packages() {
  local lib path alt owner
  while read -r lib; do
    owner=""
    for path in "$lib" "$(readlink -f "$lib")"; do
      for alt in "$path" "/usr$path" "${path#/usr}"; do
        owner="$(dpkg -S "$alt" 2>/dev/null | grep -v '^diversion by' | head -1 || true)"
        [[ -n "$owner" ]] && break 2
      done
    done
    [[ -n "$owner" ]] || { echo "NO-PACKAGE:$lib"; continue; }
    # "pkg1:arch, pkg2: /path" -> pkg1 pkg2
    echo "${owner%%: /*}" | tr ',' '\n' | sed 's/:.*//; s/ //g'
  done <"$work/libs.txt" | sort -u
}
dockerfile_list() {  # marker: the words between "# MARKER:begin" and "# MARKER:end"
  sed -n "/^# $1:begin/,/^# $1:end/{/^#/d; s/\\\\//g; p}" "$src/deploy/image/Dockerfile" |
    tr -s ' \t' '\n' | sed '/^$/d' | sort -u
}

words() { paste -sd ' ' <<<"$1"; }  # lines -> one line

failures=()
check_package_lists() {
  local derived listed setup_list missing
  derived="$(derive_packages)"
  listed="$(dockerfile_list runtime-packages)"
  if [[ -z "$listed" ]]; then
    failures+=("deploy/image/Dockerfile has no runtime-packages:begin/end block")
  elif [[ "$derived" != "$listed" ]]; then
    say "deploy/image/Dockerfile's runtime packages differ from what the binaries link"
    echo "  the Dockerfile lists:             $(words "$listed")"
    echo "  the binaries link (ldd, dpkg -S): $(words "$derived")"
    diff <(echo "$listed") <(echo "$derived") |
      sed -n 's/^</  only in the Dockerfile:/p; s/^>/  only linked:/p' || true  # diff exits 1
    failures+=("the Dockerfile's runtime package list")
  else
    say "the Dockerfile's $(wc -l <<<"$listed") runtime packages are what the binaries link"
  fi
  setup_list="$(sed -n '/^PACKAGES=(/,/^)/{s/#.*//; s/^PACKAGES=(//; s/)//; p}' "$src/tools/setup.sh" |
    tr -s ' \t' '\n' | sed '/^$/d' | sort -u)"
  missing="$(comm -23 <(dockerfile_list build-packages) <(echo "$setup_list"))"
  if [[ -n "$missing" ]]; then
    say "deploy/image/Dockerfile builds with packages tools/setup.sh does not list: $(words "$missing")"
    failures+=("the Dockerfile's build packages")
  fi
}

show_logs() {
  local f
  for f in "$work"/*.out "$work"/*.err; do
    [[ -s "$f" ]] && { echo "--- $(basename "$f") (last lines)"; tail -15 "$f"; }
  done
  return 0
}

check_version() {
  local got
  got="$(bah run --isolation chroot --network host "$cctr" -- /opt/kvgate/bin/kvgate --version \
    </dev/null 2>"$work/version.err")" || { cat "$work/version.err" >&2; die "kvgate --version failed inside the image"; }
  [[ "$got" == "kvgate $version" ]] || die "kvgate --version inside the image printed '$got', not 'kvgate $version'"
  say "inside the image: $got"
}

check_serving() {
  local ports="$work/mock-ports.json"
  "$build/bin/kvgate-mock" --workers 1 --http-port 0 --kv-port 0 --port-file "$ports" \
    --log-level warn </dev/null >"$work/mock.out" 2>"$work/mock.err" &
  local mock_pid=$!
  pids+=("$mock_pid")
  mock_started() { [[ -s "$ports" ]] || ! kill -0 "$mock_pid" 2>/dev/null; }
  if ! { poll 30 mock_started && [[ -s "$ports" ]]; }; then
    show_logs
    die "kvgate-mock wrote no port file (it exited, or 30 s passed)"
  fi
  local worker_url model
  read -r worker_url model < <(/usr/bin/python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))
print(m["workers"][0]["url"], m["model"])' "$ports") || die "cannot read kvgate-mock's $ports"
  say "kvgate-mock on the host: $worker_url (model $model)"

  bah run --isolation chroot --network host "$cctr" -- /opt/kvgate/bin/kvgate \
    --host 127.0.0.1 --port 0 --worker-urls "$worker_url" --log-level warn \
    --shutdown-grace-period-secs 1 </dev/null >"$work/gateway.out" 2>"$work/gateway.err" &
  local run_pid=$!
  pids+=("$run_pid")
  listening() { grep -qs "kvgate listening on" "$work/gateway.out"; }
  gateway_started() { listening || ! kill -0 "$run_pid" 2>/dev/null; }
  if ! { poll 60 gateway_started && listening; }; then
    show_logs
    die "kvgate inside the image did not report its port (it exited, or 60 s passed)"
  fi
  local gateway
  gateway="http://$(grep -o 'kvgate listening on [^ ]*' "$work/gateway.out" | head -1 | cut -d' ' -f4)"
  local p uid=""
  for p in $(descendants "$run_pid"); do
    if [[ "$(cat "/proc/$p/comm" 2>/dev/null)" == kvgate ]]; then
      uid="$(awk '/^Uid:/ { print $2 }' "/proc/$p/status")"
    fi
  done
  [[ "$uid" == 65532 ]] || die "kvgate inside the image runs as uid '${uid:-?}', not 65532"
  say "kvgate serves from inside the image on $gateway as uid $uid"

  health() { curl -sf --max-time 2 -o "$work/health.json" "$gateway/health"; }
  poll 60 health || { show_logs; die "GET /health was not 200 within 60 s: $(cat "$work/health.json" 2>/dev/null)"; }
  say "GET /health: $(cat "$work/health.json")"

  local code
  code="$(curl -s --max-time 30 -o "$work/completion.json" -w '%{http_code}' \
    -H 'Content-Type: application/json' "$gateway/v1/completions" \
    -d "{\"model\":\"$model\",\"prompt\":\"kvgate in a container image\",\"max_tokens\":8}")" || true
  [[ "$code" == 200 ]] ||
    { show_logs; die "POST /v1/completions answered ${code:-nothing}: $(cat "$work/completion.json" 2>/dev/null)"; }
  /usr/bin/python3 -c 'import json, sys
a = json.load(open(sys.argv[1]))
c = a["choices"][0]
print("build-image: POST /v1/completions: 200, %d completion tokens, finish_reason %s, text %r"
      % (a["usage"]["completion_tokens"], c["finish_reason"], c["text"][:40]))' "$work/completion.json" ||
    die "POST /v1/completions answered 200 but not a completion: $(head -c 300 "$work/completion.json")"
  stop_all
}

if [[ $check == 1 ]]; then
  check_package_lists
  cctr="$(bah from --name "kvgate-image-check-$$" "$image")"
  containers+=("$cctr")
  check_version
  check_serving
fi

size="$(bah images --format '{{.Size}}' "$image" 2>/dev/null | head -1)"
say "image $tag: ${size:-size unknown} ($(du -sh "$rootfs" | cut -f1) unpacked; $(du -sh "$rootfs/opt/kvgate" | cut -f1) of it /opt/kvgate)"
if [[ ${#failures[@]} -gt 0 ]]; then
  die "check failed: $(printf '%s; ' "${failures[@]}" | sed 's/; $//')"
fi
[[ $check == 0 ]] || say "check passed"
