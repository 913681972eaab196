#!/usr/bin/env bash
# The device call, as one prepared script: builds Canopy against the machine's CUDA LibTorch
# (pip's torch) and the bookworm packages that scripts/gpu/fetch-debs.sh put in .gpu/, runs
# the oracle checks on cuda:0, the whole suite, and the first benchmark beside
# genlm-backend's AsyncTransformer, and prints a summary table last.
#
#   device: scripts/gpu/device-run.sh                (after fetch-debs.sh here; carry .gpu)
#   here:   scripts/gpu/device-run.sh --practice     (no CUDA: the same steps on the CPU with
#           a small model, against the LibTorch that TORCH_CMAKE_PREFIX or python3 names)
#
# STAGES picks stages (default: core,cuda,bench,all,suite,vnni: the targets the CUDA checks
# and the benchmark need, those checks, the benchmark, everything else, the whole suite,
# the CPU's int8 and int4 kernels (AVX-512 VNNI against AVX2, where it has VNNI); also
# diagnose, check, profile and graphs, below); OUT receives the logs (at most 8 files come back from a
# device call); JOBS the build's parallelism; DEADLINE_S the seconds the whole run may
# take (stages are cut to fit it); BENCH_PARTICLES the bench stage's SMC particles (64);
# LIMITS=0 skips the profile stage's gpu_limits.py, PROFILE_WORKLOADS picks its workloads
# (decode smc scoring). The script stops at the first build error with the compiler's
# message at the end of its output.
#
# Measured on the H200 machine (16 cores): unpacking 15 s, the core build 70 s, the CUDA
# checks 61 s, the rest of the build 43 s, the suite 263 s at two ATen threads a test (948
# tests), the benchmark 96 s (model 17, Canopy 22, the peer with its float32 comparison
# 57). STAGES=core,cuda,all,suite fits one call (555 s with DEADLINE_S=555); the benchmark
# takes a second call, made at once: the machine stays warm 30 s, and build-gpu/ with it
# (a call that starts a fresh machine builds again). Practice on a 2-core machine: about
# 40 minutes.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

practice=0
[ "${1:-}" = "--practice" ] && practice=1
stages=",${STAGES:-core,cuda,bench,all,suite,vnni},"
out=${OUT:-/tmp/canopy-gpu-out}
jobs=${JOBS:-$(nproc)}
prefix=/tmp/canopy-prefix
shared=/tmp/canopy-shared/shared
build=$root/build-gpu
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
started=$(date +%s)

note() { echo "$*" | tee -a "$summary"; }
elapsed() { echo $(($(date +%s) - started)); }
# Seconds left before DEADLINE_S (from the start), for a stage's timeout: the summary is
# printed even when the device call's own limit is near.
remaining() { local left=$((${DEADLINE_S:-86400} - $(elapsed))); echo $((left > 5 ? left : 5)); }
has_stage() { [[ $stages == *",$1,"* ]]; }
# Prints a log's last lines and the summary, then exits with $1.
finish() {
  echo "==== summary ($(elapsed) s) ===="
  cat "$summary"
  exit "$1"
}

# ---- the machine
note "machine: $(nproc) cores; $(uname -r); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')$(grep -qw avx512_vnni /proc/cpuinfo && echo ', AVX-512 VNNI' || echo ', no AVX-512 VNNI')"
if command -v nvidia-smi >/dev/null; then
  note "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
fi
# CUDA's toolkit, where TorchConfig.cmake's CUDA part looks for it.
if [ -d /usr/local/cuda/bin ]; then
  export PATH=/usr/local/cuda/bin:$PATH CUDAToolkit_ROOT=/usr/local/cuda
fi
python=$(command -v python3)
torch_info=$("$python" -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), torch.utils.cmake_prefix_path)' 2>/dev/null || true)
note "python3: $python; torch: ${torch_info:-none}"
torch_prefix=${TORCH_CMAKE_PREFIX:-$(echo "$torch_info" | awk '{print $4}')}
# pip's LibTorch before 2.9 exports a static std::filesystem (pytorch#133437): how much.
note "std::filesystem symbols LibTorch exports: $(nm -D --defined-only \
  "$(dirname "$torch_prefix")/../lib/libtorch_cpu.so" 2>/dev/null | grep -c St10filesystem)"
# The C++ compiler, chosen once for CMake and the probe below: on the H200 machine plain
# g++ was Ubuntu's, which links the shared libstdc++, while CMake found /opt/gcc/bin/g++,
# which linked a static copy, so the probe passed and every program carried two runtimes.
cxx=${CXX:-$(command -v c++ || command -v g++)}
note "compilers: $cxx: $("$cxx" --version | head -1); $(cmake --version | head -1); nvcc: $(nvcc --version 2>/dev/null | tail -1 || echo none)"

# One C++ runtime, the shared libstdc++ (tests/backends/cxx_runtime_test.cpp says why). On
# the H200 machine the programs that g++ (/opt/gcc/bin/g++) linked carried a static copy
# (no libstdc++.so.6 among a test's NEEDED; the SentencePiece plugin defining std::bad_alloc's
# vtable itself) beside the shared one LibTorch and libsentencepiece use, and tests crashed
# in std::locale and std::filesystem; adding -lstdc++ did not help (g++ takes that name as
# its own runtime's). The shared library's file named before any object is linked
# dynamically whatever g++ adds: a probe program says which runtime it got, before and after.
probe_runtime() { # LDFLAGS... -> the file std::locale::classic() lies in
  mkdir -p /tmp/canopy-probe
  printf '%s\n' '#include <dlfcn.h>' '#include <cstdio>' '#include <locale>' \
    'int main() { Dl_info i{}; dladdr(&std::locale::classic(), &i); std::puts(i.dli_fname); }' \
    >/tmp/canopy-probe/probe.cpp
  "$cxx" "$@" /tmp/canopy-probe/probe.cpp -o /tmp/canopy-probe/probe -ldl 2>&1 && /tmp/canopy-probe/probe
}
runtime=$(probe_runtime ${LDFLAGS:-})
if [[ $runtime != *libstdc++.so* ]]; then
  shared_runtime=$(ldconfig -p | awk '$1 == "libstdc++.so.6" {print $NF; exit}')
  export LDFLAGS="-Wl,--no-as-needed $shared_runtime -Wl,--as-needed ${LDFLAGS:-}"
  note "$cxx links libstdc++ statically ($runtime); with LDFLAGS='$LDFLAGS': $(probe_runtime $LDFLAGS)"
else
  note "$cxx links the shared libstdc++: $runtime"
fi

# ---- the bookworm packages, unpacked into a prefix of their own
if [ ! -d "$prefix/usr" ]; then
  mkdir -p "$prefix"
  for deb in .gpu/debs/*.deb; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$deb" "$prefix"
    else # no dpkg: a .deb is an ar archive holding data.tar.*
      (cd "$prefix" && ar p "$root/$deb" "$(ar t "$root/$deb" | grep '^data.tar')" | tar -x -a -f - 2>/dev/null ||
         ar p "$root/$deb" "$(ar t "$root/$deb" | grep '^data.tar')" | tar -xJ)
    fi
  done
  lib=$prefix/usr/lib/x86_64-linux-gnu
  # Debian's alternatives name libblas.so and cblas.h; dpkg -x makes no alternatives. A
  # machine with a BLAS of its own keeps it (its LAPACK, under its LibTorch, may need that
  # BLAS's newer symbols); else bookworm's OpenBLAS.
  if ! ldconfig -p | grep -q "libblas\.so\.3 "; then
    ln -sf openblas-pthread/libblas.so.3 "$lib/libblas.so"
    ln -sf openblas-pthread/libblas.so.3 "$lib/libblas.so.3"
  fi
  ln -sf cblas-netlib.h "$prefix/usr/include/x86_64-linux-gnu/cblas.h"
  # pkg-config files name /usr: point them into the prefix.
  sed -i "s|=/usr|=$prefix/usr|g; s| -I/usr| -I$prefix/usr|g; s| -L/usr| -L$prefix/usr|g" \
    "$lib"/pkgconfig/*.pc "$prefix"/usr/share/pkgconfig/*.pc 2>/dev/null
fi
lib=$prefix/usr/lib/x86_64-linux-gnu
blas=$lib/libblas.so
[ -e "$blas" ] || blas=$(ldconfig -p | awk '/libblas\.so\.3 /{print $NF; exit}')
# One copy of each library in a process: where the machine has a library of the same
# soname (libssl.so.3, libpcre2-8.so.0, ...), the prefix's name for it points at the
# machine's (newer, and what the machine's other libraries need beside them); only the
# libraries the machine lacks come from bookworm, through LD_LIBRARY_PATH and the build
# RPATH. (The whole prefix on LD_LIBRARY_PATH handed cmake's libcurl bookworm's older
# libssl; an RPATH into the prefix gave a test bookworm's libcrypto beside trixie's libssl.)
if [ ! -d "$prefix/runtime" ]; then
  mkdir -p "$prefix/runtime"
  for so in "$lib"/*.so.* "$lib"/openblas-pthread/*.so.*; do
    [ -e "$so" ] || continue
    name=$(basename "$so")
    system=$(ldconfig -p | awk -v n="$name" '$1 == n {print $NF; exit}')
    if [ -n "$system" ]; then
      ln -sf "$system" "$so"
    else
      ln -sf "$so" "$prefix/runtime/$name"
    fi
  done
fi
export PATH=$PATH:$prefix/usr/bin
export LD_LIBRARY_PATH=$prefix/runtime${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# Debian's multiarch headers (opensslconf.h, cblas.h) sit where the compiler looks only
# under /usr: the prefix's copy of that folder goes on the include path too.
export CPATH=$prefix/usr/include/x86_64-linux-gnu
export PKG_CONFIG_PATH=$lib/pkgconfig:$prefix/usr/share/pkgconfig
export PKG_CONFIG_LIBDIR=$PKG_CONFIG_PATH
export CMAKE_PREFIX_PATH="$prefix/usr:$torch_prefix" # the variable separates with colons
export CMAKE_POLICY_VERSION_MINIMUM=3.5 # bookworm's older CMake config files under CMake 4
if [ ! -d "$shared" ] && [ -f .gpu/shared.tar.xz ]; then
  mkdir -p "$(dirname "$shared")" && tar -C "$(dirname "$shared")" -xJf .gpu/shared.tar.xz
fi
[ -d "$shared" ] || shared=$(cd .. && pwd)/shared
note "prefix ready ($(elapsed) s); fixtures: $shared"

# ctest's summary line and the failed tests' names, for the table.
ctest_result() {
  local log=$1
  grep -E "tests passed|tests failed" "$log" | tail -1
  grep -E "^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess|Exception|Not Run)" "$log" | head -30
}

# ---- build: what the CUDA checks and the benchmark need first, then the rest
configured=0
configure() {
  [ $configured = 1 ] && return 0
  local cuda_tests=ON
  [ $practice = 1 ] && cuda_tests=OFF
  if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" \
      -DCANOPY_SHARED_DIR="$shared" -DCANOPY_TEST_CUDA=$cuda_tests \
      -DCANOPY_PYTHON3="$python" -DBLAS_LIBRARIES="$blas" \
      -DOPENSSL_ROOT_DIR="$prefix/usr" >>"$out/build.log" 2>&1; then
    tail -40 "$out/build.log"
    note "configure: FAILED ($(elapsed) s)"
    finish 1
  fi
  grep -E "Caffe2: CUDA|Found CUDA|CUDA detected|Torch" "$out/build.log" | head -4
  configured=1
}
# build_targets LABEL [TARGET...]: no target builds everything.
build_targets() {
  local label=$1
  shift
  configure
  local targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  if ! timeout "$(remaining)" cmake --build "$build" -j "$jobs" "${targets[@]}" -- -k 0 \
      >>"$out/build.log" 2>&1; then
    grep -E -A12 "error:|Error [0-9]|undefined reference" "$out/build.log" | head -80
    note "build $label: FAILED ($(elapsed) s); first errors above, whole log in build.log"
    finish 1
  fi
  note "build $label: ok ($(elapsed) s)"
}
if has_stage core; then
  build_targets core canopy torch_backend_tests model_fidelity_tests
  note "C++ runtime of canopy: $(readelf -d "$build/apps/canopy/canopy" | grep -o 'libstdc++[^]]*' || echo 'STATIC (a second copy: expect crashes)')"
  # Whether decode passes can be recorded (backends/CMakeLists.txt's probe of the graph API).
  if grep -q "CANOPY_CUDA_GRAPHS_COMPILE:INTERNAL=1" "$build/CMakeCache.txt"; then
    note "CUDA graphs: compiled in"
  else
    note "CUDA graphs: NOT compiled in (decode passes run eagerly); the probe's log:"
    grep -h -A30 "CANOPY_CUDA_GRAPHS_COMPILE" "$build"/CMakeFiles/CMakeConfigureLog.yaml \
      "$build"/CMakeFiles/CMakeError.log 2>/dev/null | grep -E "error|rror:" | head -12 | tee -a "$summary"
  fi
fi

# ---- why a test crashes: DIAGNOSE_TEST (executable:gtest filter) under a debugger for a
# backtrace, which libraries it binds the symbols matching DIAGNOSE_SYMBOLS to (LD_DEBUG),
# what the SentencePiece plugin resolves its libraries to, and what LibTorch exports of
# those symbols. The default is the test that still crashed on the H200 machine once the
# scratch folders no longer used std::filesystem: SentencePiece on a malformed file.
if has_stage diagnose; then
  diagnose_test=${DIAGNOSE_TEST:-tests/backends/tokenizer_tests:LoadTokenizer.SentencePieceModelFiles}
  symbols=${DIAGNOSE_SYMBOLS:-protobuf|sentencepiece| free| malloc|_Zdl|_Znw}
  bin=$build/${diagnose_test%%:*} filter=${diagnose_test#*:}
  build_targets diagnose "$(basename "$bin")"
  debugger=$(command -v gdb || command -v cuda-gdb)
  {
    echo "== LD_PRELOAD=${LD_PRELOAD:-} MALLOC_CONF=${MALLOC_CONF:-}; debugger: ${debugger:-none}"
    echo "== NEEDED, in order"
    readelf -d "$bin" | grep NEEDED
    echo "== the plugin's libraries"
    ldd "$build"/backends/libcanopy_sentencepiece.so
    echo "== LibTorch's dynamic symbols matching"
    nm -D --defined-only "$(dirname "$torch_prefix")/../lib/libtorch_cpu.so" 2>/dev/null |
      grep -cE "$symbols" || true
    echo "== bindings"
    LD_DEBUG=bindings LD_DEBUG_OUTPUT=/tmp/canopy-ld "$bin" --gtest_filter="$filter" >/dev/null 2>&1
    grep -hE "$symbols" /tmp/canopy-ld.* | sed 's/^ *[0-9]*: *//; s/\[[0-9]*\]//g' | sort | uniq -c |
      sort -rn | head -60
    echo "== backtrace"
    timeout 120 "$debugger" -batch -ex run -ex bt --args "$bin" --gtest_filter="$filter" 2>&1 | tail -40
  } >"$out/diagnose.log" 2>&1
  note "diagnose: $(grep -c . "$out/diagnose.log") lines in diagnose.log ($(elapsed) s)"
fi

# ---- a targeted rerun: the targets CHECK_TARGETS, then the tests CHECK_TESTS (ctest -R)
if has_stage check; then
  build_targets check ${CHECK_TARGETS:-}
  timeout "$(remaining)" ctest --test-dir "$build" -R "${CHECK_TESTS:-.}" -j "$jobs" \
    --timeout 300 --output-on-failure >"$out/ctest-check.log" 2>&1
  note "check ($(elapsed) s): $(ctest_result "$out/ctest-check.log")"
fi


# ---- the oracle checks on cuda:0 (tests labelled cuda)
if has_stage cuda && [ $practice = 0 ]; then
  timeout "$(remaining)" ctest --test-dir "$build" -L cuda -j 8 --timeout 300 --output-on-failure \
    >"$out/ctest-cuda.log" 2>&1
  note "cuda tests ($(elapsed) s): $(ctest_result "$out/ctest-cuda.log")"
  grep -hE "^(bfloat16|float16) on cuda|fidelity .* largest|met:" "$out/ctest-cuda.log" | sort -u | head -20 | tee -a "$summary"
fi

# The most device memory in use while a command runs, in MiB, less what was in use before
# (nvidia-smi's reading, the same for both engines: context, allocator and all), into
# /tmp/canopy-gpu-peak; and the mean of nvidia-smi's utilization.gpu over the run (the
# share of time a kernel was running), into /tmp/canopy-gpu-busy.
gpu_reading() { nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader,nounits 2>/dev/null | head -1 | tr -d ' '; }
with_gpu_peak() {
  local before peak=0 busy=0 samples=0 pid now
  before=$(gpu_reading)
  before=${before%%,*}
  "$@" &
  pid=$!
  while kill -0 $pid 2>/dev/null; do
    now=$(gpu_reading)
    if [ -n "$now" ]; then
      [ "${now%%,*}" -gt "$peak" ] && peak=${now%%,*}
      busy=$((busy + ${now##*,})) samples=$((samples + 1))
    fi
    sleep 0.2
  done
  wait $pid
  local rc=$?
  [ -n "$before" ] && echo "$((peak - before))" >/tmp/canopy-gpu-peak || echo "n/a" >/tmp/canopy-gpu-peak
  [ $samples -gt 0 ] && echo "$((busy / samples))%" >/tmp/canopy-gpu-busy || echo "n/a" >/tmp/canopy-gpu-busy
  return $rc
}

# ---- the benchmarks' model: the ~0.8B bfloat16 synthetic Llama (a small one in practice),
# made once per machine. GPT-2's vocabulary (50,257) rather than Llama 2's 32,000:
# genlm-backend reads a byte vocabulary offline only from a byte-level BPE tokenizer
# (Llama 2's needs its SentencePiece .model, which ../shared lacks); GPT-2's files sit in
# ../shared.
model=/tmp/canopy-bench-model
canopy=$build/apps/canopy/canopy
device=cuda:0 dtype=bfloat16
shape=(--hidden 2048 --layers 16 --heads 32 --kv-heads 8 --vocab 50257 --context 2048)
if [ $practice = 1 ]; then
  device=cpu dtype=float32
  shape=(--hidden 256 --layers 4 --heads 8 --kv-heads 2 --vocab 50257 --context 2048)
fi
make_bench_model() {
  [ -d "$model" ] && return 0
  "$canopy" make-model --arch llama "${shape[@]}" --out "$model" >/dev/null
  cp "$shared/models/gpt2-synthetic/vocab.json" "$shared/models/gpt2-synthetic/merges.txt" "$model/"
  echo '{"tokenizer_class": "GPT2Tokenizer"}' >"$model/tokenizer_config.json"
  note "model: $(du -sh "$model" | cut -f1) at $model ($(elapsed) s)"
}

# ---- where a pass's time goes on the GPU (issue 32): what the device allows (copy rate,
# bf16 matrix peak, one decode step of the model's shape eager and as a CUDA graph, which
# attention kernels take Canopy's masks: scripts/gpu/gpu_limits.py), Canopy's lone pass
# part by part (host time per part: nothing synchronises between parts), Canopy on the
# issue's three workloads, and, where the machine has Nsight Systems, the GPU's busy time
# beside the wall time of an SMC run.
if has_stage profile; then
  make_bench_model
  [ "${LIMITS:-1}" = 1 ] && timeout "$(remaining)" "$python" scripts/gpu/gpu_limits.py --config "$model/config.json" \
    --device $device >"$out/gpu-limits.json" 2>>"$out/profile.log"
  note "gpu limits: exit $? ($(elapsed) s)"
  [ "${LIMITS:-1}" = 1 ] && "$python" - "$out/gpu-limits.json" <<'PY' | tee -a "$summary"
import json, sys
f = json.load(open(sys.argv[1]))
print("copy %.0f GB/s, bf16 matmul %.0f TFLOP/s, weights %.2f GB: decode bound %.3f ms" % (
    f["copy_gbs"], f["matmul_tflops"], f["weight_bytes"] / 1e9, f["decode_bound_ms"]))
for r in f["decode"]:
    print("decode step, batch %d: eager %.2f ms, graph %s ms, graph+rows to host %s ms" % (
        r["batch"], r["eager_ms"], "%.2f" % r["graph_ms"] if "graph_ms" in r else "n/a",
        "%.2f" % r["graph_and_copy_ms"] if "graph_and_copy_ms" in r else "n/a"))
if isinstance(f["sdpa"], dict):
    for k, v in f["sdpa"].items():
        print("sdpa %s: %s" % (k, v))
PY
  timeout "$(remaining)" "$canopy" bench --profile --model "$model" --devices "[\"$device\"]" \
    --dtype $dtype >"$out/pass-profile.txt" 2>>"$out/profile.log"
  note "lone pass profile: exit $? ($(elapsed) s)"
  head -60 "$out/pass-profile.txt" | tee -a "$summary"
  # One workload a run, so that the GPU's busy share is the workload's own.
  : >"$out/bench-32.txt"
  for workload in ${PROFILE_WORKLOADS:-decode smc scoring}; do
    with_gpu_peak timeout "$(remaining)" "$canopy" bench --workload $workload --variants full \
      --model "$model" --particles 256 --steps 64 --sequences 64 --sequence-length 256 \
      --devices "[\"$device\"]" --dtype $dtype --kv_budget_bytes 8589934592 \
      >>"$out/bench-32.txt" 2>>"$out/profile.log"
    note "canopy $workload: exit $?, GPU busy $(cat /tmp/canopy-gpu-busy) of the run (model load included) ($(elapsed) s)"
    grep -E "^$workload +full" "$out/bench-32.txt" | tee -a "$summary"
  done
  if command -v nsys >/dev/null; then
    timeout "$(remaining)" nsys profile -t cuda,osrt --force-overwrite true -o /tmp/canopy-smc \
      "$canopy" bench --workload smc --variants full --model "$model" --particles 256 --steps 16 \
      --devices "[\"$device\"]" --dtype $dtype --kv_budget_bytes 8589934592 \
      >>"$out/profile.log" 2>&1
    timeout "$(remaining)" nsys stats -r cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_time_sum \
      -f csv /tmp/canopy-smc.nsys-rep >"$out/nsys-smc.csv" 2>>"$out/profile.log"
    note "nsys: exit $? ($(elapsed) s), $(wc -l <"$out/nsys-smc.csv") lines in nsys-smc.csv"
  else
    note "nsys: not on this machine"
  fi
fi

# ---- decode passes recorded as CUDA graphs beside the same passes unrecorded (issue 32):
# one sequence decoding (its target: the bench's "bandwidth bound" line), and SMC at 256
# particles in passes of up to 256, under --decode_graphs off then auto, twice over;
# scoring every prefix of 64 x 256 (its target: the "matmul peak" line); SMC with two
# workers on the one GPU (the
# comp/uniq column: 1.00); four populations stepped together with one pass in flight
# per worker, then two (pipelined); then a lone pass part by part, recorded (the parts
# "decode step: inputs / record / replay" say the buckets ran).
if has_stage graphs; then
  make_bench_model
  : >"$out/bench-graphs.txt"
  for round in 1 2; do
    for graphs in off auto; do
      timeout "$(remaining)" "$canopy" bench --workload decode,smc --variants full \
        --model "$model" --particles 256 --steps 32 --batch_size 256 --decode_graphs $graphs \
        --devices "[\"$device\"]" --dtype $dtype --kv_budget_bytes 8589934592 \
        >>"$out/bench-graphs.txt" 2>>"$out/profile.log"
      note "decode_graphs $graphs, round $round: exit $? ($(elapsed) s)"
      grep -E "^(decode|smc) +full|bandwidth bound" "$out/bench-graphs.txt" | tail -3 |
        tee -a "$summary"
    done
  done
  # Issue 32's scoring: every prefix of 64 sequences of 256 tokens, its passes' FLOP/s
  # against the bfloat16 peak the bench measures on the GPU in the same run.
  timeout "$(remaining)" "$canopy" bench --workload scoring --variants full --model "$model" \
    --sequences 64 --sequence-length 256 --batch_size 256 --devices "[\"$device\"]" \
    --dtype $dtype --kv_budget_bytes 8589934592 >>"$out/bench-graphs.txt" 2>>"$out/profile.log"
  note "scoring 64 x 256: exit $? ($(elapsed) s)"
  grep -E "^matmul ceiling|^scoring +full|matmul peak" "$out/bench-graphs.txt" | tail -3 |
    tee -a "$summary"
  # Two workers on one GPU, KV reused across SMC steps: tokens computed / unique stays 1.00.
  timeout "$(remaining)" "$canopy" bench --workload smc --variants full --model "$model" \
    --particles 256 --steps 32 --batch_size 256 --devices "[\"$device\",\"$device\"]" \
    --dtype $dtype --kv_budget_bytes 4294967296 >>"$out/bench-graphs.txt" 2>>"$out/profile.log"
  note "two workers on $device: exit $? ($(elapsed) s)"
  grep -E "^smc +full" "$out/bench-graphs.txt" | tail -1 | tee -a "$summary"
  # Passes pipelined: four populations of 64 particles make four passes a step; with two
  # in flight the worker starts the next before the last one's rows are on the host.
  for in_flight in 1 2; do
    timeout "$(remaining)" "$canopy" bench --workload smc --variants full --model "$model" \
      --particles 64 --populations 4 --steps 32 --batch_size 64 \
      --worker_passes_in_flight $in_flight --devices "[\"$device\"]" --dtype $dtype \
      --kv_budget_bytes 4294967296 >>"$out/bench-graphs.txt" 2>>"$out/profile.log"
    note "passes in flight $in_flight: exit $? ($(elapsed) s)"
    grep -E "^smc +full" "$out/bench-graphs.txt" | tail -1 | tee -a "$summary"
  done
  timeout "$(remaining)" "$canopy" bench --profile --model "$model" --devices "[\"$device\"]" \
    --dtype $dtype >"$out/pass-profile-graphs.txt" 2>>"$out/profile.log"
  note "lone pass profile, decode_graphs auto: exit $? ($(elapsed) s)"
  grep -iE "decode step|row copy|whole pass|passes" "$out/pass-profile-graphs.txt" | head -12 | tee -a "$summary"
fi

# ---- the first benchmark beside genlm-backend's AsyncTransformer, same model, same GPU.
# batch_size 256 (now the default on CUDA devices, said here so the runs say it): at 64,
# SMC's 256 particles took about five passes a step (mean batch 51.6 on the H200), where
# the GPU is launch-bound and one pass of 256 costs about what one of 64 does
# (scripts/gpu/gpu_limits.py: a CUDA-graph decode step 2.44 ms at 64, 3.39 at 256).
if has_stage bench; then
  make_bench_model
  with_gpu_peak timeout "$(remaining)" "$canopy" bench --workload smc,scoring --variants full \
    --model "$model" --particles ${BENCH_PARTICLES:-64} --steps 64 --sequences 32 --sequence-length 256 \
    --batch_size 256 \
    --devices "[\"$device\"]" --dtype $dtype --kv_budget_bytes 8589934592 --json \
    >"$out/bench-canopy.json" 2>"$out/bench-peer.log"
  note "canopy bench: exit $?, GPU memory peak $(cat /tmp/canopy-gpu-peak) MiB ($(elapsed) s)"
  PYTHONUNBUFFERED=1 with_gpu_peak timeout "$(remaining)" "$python" scripts/peers/bench_genlm_backend.py \
    --model "$model" --device "$device" --dtype $dtype --genlm "$shared/third_party" \
    --gpt2 "$shared/models/gpt2-synthetic" --particles ${BENCH_PARTICLES:-64} \
    --canopy "$canopy" --canopy-json "$out/bench-canopy.json" --out "$out/bench-peer.json" \
    >>"$out/bench-peer.log" 2>&1
  note "peer bench: exit $?, GPU memory peak $(cat /tmp/canopy-gpu-peak) MiB, the float32 reference included ($(elapsed) s)"
  tail -25 "$out/bench-peer.log"
  grep -E "^\|" "$out/bench-peer.log" | tee -a "$summary" >/dev/null
fi

# ---- the int8 and int4 products on this machine's CPU (issue 31): where it has AVX-512
# VNNI, its kernels (CANOPY_BLOCK_KERNELS=avx512_vnni) beside the AVX2 ones (the default),
# ATen's own capability left alone, one thread, a 110M Llama decoding, then scoring (many
# rows a product); two alternations. About two minutes. The suite's weight_blocks_test
# holds the two to the same bits.
if has_stage vnni; then
  if ! grep -qw avx512_vnni /proc/cpuinfo; then
    note "vnni: this CPU has no AVX-512 VNNI ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-))"
  else
    vnni_model=/tmp/canopy-110m
    [ -d "$vnni_model" ] || "$canopy" make-model --arch llama --hidden 768 --layers 12 --heads 12 \
      --vocab 32000 --context 1024 --out "$vnni_model" >/dev/null
    for round in 1 2; do
      for workload in decode scoring; do
        for weights in int8 int4; do
          for kernels in avx512_vnni avx2; do
            rate=$(CANOPY_BLOCK_KERNELS=$kernels OPENBLAS_NUM_THREADS=1 timeout "$(remaining)" "$canopy" \
              bench --model "$vnni_model" --devices '["cpu"]' --weight_dtype $weights \
              --workload $workload --steps 32 --sequences 2 --sequence-length 64 \
              --variants full --json 2>>"$out/vnni.log" | tee -a "$out/vnni.log" |
              "$python" -c 'import json,sys; d=json.load(sys.stdin); r=d["results"][0]; print("%.1f q/s, %s kernels" % (r["queries"] / r["seconds"], d["model"]["weight_kernels"]))')
            note "vnni round $round: $weights $workload (CANOPY_BLOCK_KERNELS=$kernels): $rate"
          done
        done
      done
    done
  fi
fi

# ---- the whole suite (a failure is run again once, alone, to tell load from a defect)
has_stage all && build_targets all
if has_stage suite; then
  # Two intra-op threads a test, as on CI's 2-core machines: with ATen's default (all 16
  # cores) each of 16 parallel tests, the slowest took 100 s and the suite over 560 s.
  # Not the genlm label: genlm's tests need Debian's pytest and friends, which the
  # machine's registry-less Python cannot get.
  OMP_NUM_THREADS=${SUITE_THREADS:-2} timeout "$(remaining)" ctest --test-dir "$build" -LE "cuda|genlm" \
    -j "$jobs" --timeout 300 --output-on-failure >"$out/ctest-suite.log" 2>&1
  note "suite ($(elapsed) s): $(ctest_result "$out/ctest-suite.log")"
  if ! grep -q "100% tests passed" "$out/ctest-suite.log"; then
    timeout "$(remaining)" ctest --test-dir "$build" --rerun-failed --timeout 300 --output-on-failure \
      >"$out/ctest-rerun.log" 2>&1
    note "suite failures run again alone: $(ctest_result "$out/ctest-rerun.log")"
  fi
fi

finish 0
