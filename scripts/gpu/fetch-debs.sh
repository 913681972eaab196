#!/usr/bin/env bash
# Run here (a Debian bookworm machine with apt), before a device call: downloads the
# bookworm .deb files that Canopy's build and suite need beside a CUDA LibTorch, and packs
# the test fixtures, into .gpu/ (ignored by git), which the device call carries.
# The device machine has CUDA, a CUDA LibTorch (pip's torch), CMake, ninja, g++ and Python,
# but no package registry; scripts/gpu/device-run.sh unpacks these with dpkg -x into a
# prefix of its own. Takes about 2 minutes (most of it compressing ../shared).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.gpu
mkdir -p "$out/debs"
rm -f "$out"/debs/*.deb

# Each -dev package with the runtime libraries it names (the device image may lack any).
packages=(
  libcaf-dev libcaf-core0.17 libcaf-io0.17 libcaf-openssl0.17
  libboost1.74-dev                                  # Asio and Beast, headers only
  libgtest-dev libgmock-dev googletest
  nlohmann-json3-dev
  libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
  libsentencepiece-dev libsentencepiece0 libprotobuf-lite32
  libxxhash-dev libxxhash0
  libutf8proc-dev libutf8proc2
  libssl-dev libssl3 openssl
  libjemalloc-dev libjemalloc2
  libsimde-dev                                      # the VNNI kernels' intrinsics, headers only
  libblas-dev libblas3 libopenblas0-pthread libgfortran5 libquadmath0  # cblas.h, OpenBLAS
  pkgconf pkgconf-bin libpkgconf3                   # pkg-config, for CMake's pkg_check_modules
)
(cd "$out/debs" && apt-get download -q "${packages[@]}")

# The fixtures the suite and the checks read (models, oracle, genlm's sources), less the two
# large tokenizer.json files whose tests need no GPU: the pack stays under the device's
# 64 MiB working-tree limit with the .deb files beside it.
shared="$(cd .. && pwd)/shared"
if [ -d "$shared" ]; then
  tar -C "$(dirname "$shared")" -cf - \
      --exclude=shared/hooks --exclude=shared/models/tokenizers/llama3 \
      --exclude=shared/models/tokenizers/qwen3 shared |
    xz -6 -T0 >"$out/shared.tar.xz"
fi
du -sh "$out"/debs "$out"/shared.tar.xz 2>/dev/null || true
