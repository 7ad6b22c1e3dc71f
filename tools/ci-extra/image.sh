#!/usr/bin/env bash
# CI image step: assembles kvgate's container image from the release build (tools/build-image.sh:
# buildah, vfs storage, chroot runs, no registry) and checks it: deploy/image/Dockerfile's runtime
# packages against what the binaries link, `kvgate --version` inside the image, and the gateway
# serving from inside it, as uid 65532, in front of a kvgate-mock worker on the host.
#
#   tools/ci-extra/image.sh                                  from build/release
#   KVGATE_IMAGE_BUILD_DIR=build/x tools/ci-extra/image.sh   from another tree
#
# CI runs it after `make test`, whose release tree it uses as it is; a tree without the binaries
# is configured (release preset) and only they are built. Takes under a minute on two cores.
set -euo pipefail

cd "$(dirname "$0")/../.."
build_dir="${KVGATE_IMAGE_BUILD_DIR:-build/release}"
binaries=(kvgate kvgate-mock kvgate-replay kvgate-events kvgate-corpus)

missing=0
for b in "${binaries[@]}"; do [[ -x "$build_dir/bin/$b" ]] || missing=1; done
if [[ $missing == 1 ]]; then
  [[ -f "$build_dir/build.ninja" ]] || cmake --preset release -B "$build_dir" >/dev/null
  cmake --build "$build_dir" --target "${binaries[@]}" -j "${IMAGE_BUILD_JOBS:-2}"
fi

start=$SECONDS
tools/build-image.sh "$build_dir" --check   # the image kvgate:latest
echo "image: built and checked in $((SECONDS - start)) s"
