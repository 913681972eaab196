#!/usr/bin/env bash
# Builds the llama.cpp peer of `scripts/peers/bench-llama-cpp.sh` for the CPU: the
# library at a named commit of its public source, and llama_cpp_peer (beside this
# script), which runs the benchmark's workloads through llama.h.
#
#   scripts/peers/build-llama-cpp.sh [GIT_SOURCE]
#
# GIT_SOURCE: a clone URL or a local git directory (a mirror serves: the build reads
# the commit below from it, e.g. the ngxson/llama.cpp mirror that `fetch` brings);
# default https://github.com/ggml-org/llama.cpp.
# Output: build/peers/llama.cpp/{src,build} (with llama-quantize, for the Q8_0 and
# Q4_0 files), build/peers/llama_cpp_peer.
# Needs cmake, g++ and git (the quick start's packages, and git).
set -euo pipefail

commit=3f545beccee69d9975f466ec7e45fd9aacd8ba90 # master of 2026-08-22
source_git=${1:-https://github.com/ggml-org/llama.cpp}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$root/build/peers
src=$out/llama.cpp/src
mkdir -p "$out/llama.cpp"

if [[ ! -d $src/.git ]] || [[ $(git -C "$src" rev-parse HEAD) != "$commit" ]]; then
  rm -rf "$src"
  git clone --quiet --no-checkout "$source_git" "$src"
  # Its models/ folder holds vocabulary test files (large, and absent from some
  # mirrors) that the library does not need.
  git -C "$src" sparse-checkout set --no-cone '/*' '!/models/'
  git -C "$src" checkout --quiet "$commit"
fi

# CPU only, no network, no examples: the library is all the peer links, and
# llama-quantize and llama-bench are its tools the benchmark and the README use.
cmake -S "$src" -B "$out/llama.cpp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
  -DLLAMA_BUILD_TOOLS=ON >/dev/null
cmake --build "$out/llama.cpp/build" --target llama llama-quantize llama-bench >/dev/null

lib=$out/llama.cpp/build
g++ -std=c++17 -O2 -o "$out/llama_cpp_peer" "$here/llama_cpp_peer.cpp" \
  -I"$src/include" -I"$src/ggml/include" \
  "$lib/src/libllama.a" "$lib/ggml/src/libggml.a" "$lib/ggml/src/libggml-cpu.a" \
  "$lib/ggml/src/libggml-base.a" -fopenmp -lpthread
echo "built $out/llama_cpp_peer against llama.cpp $commit"
