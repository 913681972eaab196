#!/usr/bin/env bash
# Compiles the sources that only a CUDA LibTorch or LibTorch 2.x builds (the CUDA graph
# recording, backends/src/models/recorded_step.cpp with CANOPY_CUDA_GRAPHS; the fused
# attention; the Llama forward's use of at::rms_norm; the rows' copy to the host under an
# event, and the torch backend that starts passes) against LibTorch 2.x's headers and
# CUDA's, syntax only, so that an error shows here rather than in a GPU session's few
# minutes. LibTorch's headers: Debian's libtorch-dev of each suite in SUITES (default
# "trixie sid": 2.6 and, at the time of writing, 2.14, either side of the GPU machine's
# pip 2.11), downloaded once into DIR; Debian's CPU package ships ATen's and c10's CUDA
# headers. CUDA's: /usr/local/cuda (this machine kind has the toolkit). Headers that ask
# for C++20 (2.14's) are compiled as C++20. Run by hand before a device call, not in CI.
#
#   scripts/gpu/check-cuda-sources.sh [DIR]        (default /var/tmp/canopy-torch2-headers)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-/var/tmp/canopy-torch2-headers}
cuda=${CUDA_HOME:-/usr/local/cuda}
[ -f "$cuda/include/cuda_runtime_api.h" ] || { echo "no CUDA headers under $cuda" >&2; exit 1; }

status=0
for suite in ${SUITES:-trixie sid}; do
  root=$dir/$suite
  if [ ! -d "$root/usr/include/ATen" ]; then
    mkdir -p "$dir/$suite-apt/lists/partial" "$dir/$suite-apt/debs"
    echo "deb http://deb.debian.org/debian $suite main" >"$dir/$suite-apt/sources.list"
    apt=(-o Dir::Etc::sourcelist="$dir/$suite-apt/sources.list" -o Dir::Etc::sourceparts=-
         -o Dir::State::Lists="$dir/$suite-apt/lists")
    apt-get "${apt[@]}" update -q >/dev/null
    (cd "$dir/$suite-apt/debs" && apt-get "${apt[@]}" download libtorch-dev >/dev/null 2>&1)
    dpkg-deb -x "$dir/$suite-apt"/debs/libtorch-dev_*.deb "$root"
  fi
  include=$root/usr/include
  # A CUDA LibTorch generates this header at its build; the CPU package has none.
  mkdir -p "$dir/stub/c10/cuda/impl"
  [ -f "$include/c10/cuda/impl/cuda_cmake_macros.h" ] ||
    echo '#pragma once' >"$dir/stub/c10/cuda/impl/cuda_cmake_macros.h"
  standard=c++17
  grep -q "__cplusplus < 202002L" "$include/ATen/ATen.h" && standard=c++20
  version=$(cat "$include/torch/csrc/api/include/torch/version.h" \
    "$include/torch/headeronly/version.h" 2>/dev/null |
    awk '/define TORCH_VERSION_(MAJOR|MINOR|PATCH) / {printf "%s%s", sep, $3; sep="."}' ||
    true) # one of the two files is missing in each version
  for file in backends/src/models/recorded_step.cpp backends/src/models/fused_attention.cpp \
    backends/src/models/llama_model.cpp backends/src/models/rows_to_host.cpp \
    backends/src/models/started_torch_pass.cpp backends/src/models/torch_backend.cpp; do
    if g++ -std=$standard -fsyntax-only -Wall -Wextra -DCANOPY_CUDA_GRAPHS \
        -I"$src/backends/src" -I"$src/backends/include" -I"$src/cache/include" \
        -isystem "$dir/stub" -isystem "$include" -isystem "$include/torch/csrc/api/include" \
        -isystem "$cuda/include" "$src/$file"; then
      echo "ok: $file (LibTorch $version, $standard)"
    else
      echo "FAILED: $file (LibTorch $version, $standard)" && status=1
    fi
  done
done
echo "CUDA: $("$cuda/bin/nvcc" --version 2>/dev/null | tail -1)"
exit $status
