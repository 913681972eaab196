#!/usr/bin/env bash
# Installs Canopy's build and test dependencies from Debian bookworm packages.
# Used by the README's quick start and by .ci/run; safe to run again (apt skips what is present).
set -euo pipefail

packages=(
  cmake ninja-build g++
  libcaf-dev            # CAF 0.17.6: core, io, openssl (no CMake config; see cmake/FindCAF.cmake)
  libtorch-dev          # LibTorch 1.13.1, CPU build
  libopenblas0-pthread  # without it torch falls back to the reference BLAS (~25x slower matmul)
  libblas-dev           # cblas.h: the direct CPU forward calls (Open)BLAS itself
  libboost-dev          # Asio and Beast, header-only
  libgtest-dev
  nlohmann-json3-dev
  libpcre2-dev          # GPT-2 pre-tokenizer regex: Unicode classes (\p{L}, \p{N}) in UTF + UCP mode, JIT
  libsentencepiece-dev  # optional: SentencePiece .model tokenizers (CMake compiles support in when found)
  libxxhash-dev         # model fingerprints: XXH3-128 over the weights at memory speed
  libutf8proc-dev       # tokenizer.json normalizers: Unicode NFC/NFKC on UTF-8 directly (small; ICU works in UTF-16)
  libssl-dev            # cluster tokens: HMAC-SHA256 and the CSPRNG (CAF's TLS uses OpenSSL too)
  libjemalloc-dev       # the canopy program's allocator: 1.3-1.7x the queries/s of glibc's malloc
  libsimde-dev          # headers: the AVX-512 VNNI kernels' intrinsics, emulated in the tests on AVX2-only CPUs
  openssl               # the tests' TLS certificates (the README's TLS example too)
  python3-numpy         # the Python client (apps/python/canopy_client) and its tests
  python3-jinja2        # apply_chat_template renders chat templates with Jinja2, as transformers does
  python3-venv python3-pip python3-setuptools  # the test of `pip install ./apps/python`
  curl                  # the quick start's request against canopy serve
  chromium              # the page's browser tests (tests/node/web_page_test.mjs, through playwright-core)
  clang-format          # ctest clang_format_check: the code as .clang-format lays it out (v14)
  # genlm's own tests over CanopyLM (tests/python/genlm; ../shared/third_party/README.md):
  # their imports and test runners, and Cython for arsenal's two heaps.
  python3-torch python3-scipy python3-regex python3-numba python3-jsonschema
  python3-lark python3-pandas python3-frozendict python3-psutil python3-tqdm python3-rich
  python3-ipython python3-matplotlib python3-graphviz
  python3-pytest python3-pytest-asyncio python3-pytest-mock python3-pytest-timeout
  python3-pytest-benchmark python3-hypothesis
  cython3 libpython3.11-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
fi

# Node.js and npm for the OpenAI SDK and browser tests (tests/node) and the page's
# build-time assets (apps/server/web): Debian's, unless node is there
# already (a NodeSource node bundles npm and conflicts with Debian's npm package).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q nodejs npm
fi
# The SDK and playwright-core, pinned by tests/node/package-lock.json (test-time only;
# the product never runs node).
npm ci --prefix "$(dirname "$0")/../tests/node" --no-audit --no-fund --loglevel=error
# uPlot, which the page at / draws its charts with, pinned by apps/server/web's lockfile:
# read at build time and embedded into the binary (nothing is fetched at run time).
npm ci --prefix "$(dirname "$0")/../apps/server/web" --no-audit --no-fund --loglevel=error
