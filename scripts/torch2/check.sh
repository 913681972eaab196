#!/usr/bin/env bash
# Builds Canopy and runs its whole suite against LibTorch 2.x on the CPU: Debian trixie's
# libtorch-dev 2.6 and libcaf-dev 0.17.6 (the rest of scripts/install-deps.sh's list, by the
# same names), in a trixie root made with debootstrap from Debian's archive. The same sources
# build against bookworm's LibTorch 1.13 (CI) and this 2.x, as a CUDA LibTorch from pip is.
# Run by hand before device work (scripts/gpu/), not in CI: as root, with debootstrap
# installed and about 4 GB free under ROOT. ROOT is kept for the next run.
# Expected time on a 2-core machine, from the same build in such a root (bookworm's other
# packages, trixie's LibTorch 2.6 and g++ 14: scripts/gpu/device-run.sh --practice): about
# 45 minutes, debootstrap 1, packages 4, the build 25, the suite 12. That run passed 868 of
# 872 tests; the 4 others needed what its root lacked (make, python3-venv, listed below).
#
#   scripts/torch2/check.sh [ROOT]        (default /var/tmp/canopy-trixie)
#
# TARGETS and TESTS narrow it: TARGETS="torch_backend_tests backend_internals_tests"
# TESTS="shared_models|ragged" builds those targets and runs the tests ctest -R picks
# (about 12 minutes from a new root, 2 when only the backends changed).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
shared=$(cd "$src/.." && pwd)/shared
root=${1:-/var/tmp/canopy-trixie}

if [ ! -x "$root/usr/bin/apt-get" ]; then
  debootstrap --variant=minbase trixie "$root" http://deb.debian.org/debian
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$root/src" "$root/shared"
mounted=()
bind() { mount --bind "$1" "$2" && mounted=("$2" "${mounted[@]}"); }
cleanup() { for m in "${mounted[@]}"; do umount "$m" || true; done; }
trap cleanup EXIT
mountpoint -q "$root/proc" || { mount -t proc proc "$root/proc" && mounted=("$root/proc" "${mounted[@]}"); }
mountpoint -q "$root/dev" || bind /dev "$root/dev"
bind "$src" "$root/src"
[ -d "$shared" ] && bind "$shared" "$root/shared"

chroot "$root" env TARGETS="${TARGETS:-}" TESTS="${TESTS:-}" bash -euo pipefail -c '
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    cmake ninja-build make g++ pkgconf libcaf-dev libtorch-dev libopenblas0-pthread libblas-dev \
    libboost-dev libgtest-dev libgmock-dev nlohmann-json3-dev libpcre2-dev \
    libsentencepiece-dev libxxhash-dev libutf8proc-dev libssl-dev libjemalloc-dev libsimde-dev openssl \
    python3-numpy python3-venv python3-pip python3-setuptools curl ca-certificates
  echo "LibTorch $(dpkg-query -W -f="\${Version}" libtorch-dev), CAF $(dpkg-query -W -f="\${Version}" libcaf-dev), $(g++ --version | head -1)"
  cmake -S /src -B /build-torch2 -G Ninja -DCANOPY_SHARED_DIR=/shared
  targets=()
  for t in $TARGETS; do targets+=(--target "$t"); done
  cmake --build /build-torch2 "${targets[@]}"
  CANOPY_REQUIRE_FIXTURES=$([ -d /shared/models ] && echo 1 || echo 0) \
    ctest --test-dir /build-torch2 --output-on-failure ${TESTS:+-R "$TESTS"}
'
