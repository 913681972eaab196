#!/usr/bin/env bash
# Builds the llama.cpp peer of `scripts/peers/bench-llama-cpp.sh` for the CPU: the
# library at a named commit of its public source, and llama_cpp_peer (beside this
# script), which runs the benchmark's workloads through llama.h.
#
#   scripts/peers/build-llama-cpp.sh [GIT_SOURCE]
#
# GIT_SOURCE: a clone URL or a local git directory (a mirror serves: the build reads
# the commit below from it); default https://github.com/ggerganov/llama.cpp.
# Output: build/peers/llama.cpp/{src,build}, build/peers/llama_cpp_peer.
# Needs cmake, g++ and git (the quick start's packages, and git).
set -euo pipefail

commit=c392e5094deaf2d1a7c18683214f007fad3fe42b # master of 2025-02-20
source_git=${1:-https://github.com/ggerganov/llama.cpp}
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

# CPU only, no network, no examples: the library is all the peer links.
cmake -S "$src" -B "$out/llama.cpp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
cmake --build "$out/llama.cpp/build" --target llama >/dev/null

lib=$out/llama.cpp/build
g++ -std=c++17 -O2 -o "$out/llama_cpp_peer" "$here/llama_cpp_peer.cpp" \
  -I"$src/include" -I"$src/ggml/include" \
  "$lib/src/libllama.a" "$lib/ggml/src/libggml.a" "$lib/ggml/src/libggml-cpu.a" \
  "$lib/ggml/src/libggml-base.a" -fopenmp -lpthread
echo "built $out/llama_cpp_peer against llama.cpp $commit"
