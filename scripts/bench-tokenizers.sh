#!/usr/bin/env bash
# Canopy's tokenizer.json encoder against the HF tokenizers library (its Rust code through
# the npm binding @anush008/tokenizers@0.6.0), side by side on the same text, alternating
# runs so that a noisy machine affects both alike:
#   scripts/bench-tokenizers.sh [TEXT_FILE] [ROUNDS]
# Without TEXT_FILE it encodes 4.5 MB of English: Debian's license texts (GPL-3,
# LGPL-2.1, Apache-2.0, MPL-2.0, GFDL-1.3), 40 times over, the same on every bookworm. Needs build/apps/canopy/canopy, node and npm (the binding is installed into
# build/hf-bench/ on first use). Each line: tokenizer, ids, whether the two agree id for id
# (by checksum), and MB/s (median of 5 encodes) for each and their ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
canopy=build/apps/canopy/canopy
shared=${CANOPY_SHARED_DIR:-../shared}
text=${1:-}
rounds=${2:-3}
if [ -z "$text" ]; then
  text=build/hf-bench/english.txt
  mkdir -p build/hf-bench
  for _ in $(seq 40); do
    cat /usr/share/common-licenses/{GPL-3,LGPL-2.1,Apache-2.0,MPL-2.0,GFDL-1.3}
  done > "$text"
fi
if [ ! -d build/hf-bench/node_modules/@anush008/tokenizers ]; then
  mkdir -p build/hf-bench
  (cd build/hf-bench && npm install --silent --no-save @anush008/tokenizers@0.6.0)
fi
export NODE_PATH=$PWD/build/hf-bench/node_modules
field() { sed -E "s/.*\"$1\":([0-9.e+-]+).*/\\1/"; }
for name in llama2 llama3 qwen3; do
  tokenizer=$shared/models/tokenizers/$name/tokenizer.json
  for round in $(seq "$rounds"); do
    ours=$("$canopy" bench --encode "$text" --tokenizer "$tokenizer" --json)
    theirs=$(node scripts/hf-encode-bench.js "$tokenizer" "$text" 5)
    same=$([ "$(echo "$ours" | field checksum)" = "$(echo "$theirs" | field checksum)" ] &&
           [ "$(echo "$ours" | field ids)" = "$(echo "$theirs" | field ids)" ] && echo yes || echo NO)
    a=$(echo "$ours" | field mb_per_s_median)
    b=$(echo "$theirs" | field mb_per_s_median)
    printf '%-7s round %d: %8d ids, same ids: %-3s canopy %6.2f MB/s, HF %6.2f MB/s, ratio %.2fx\n' \
      "$name" "$round" "$(echo "$ours" | field ids)" "$same" "$a" "$b" "$(awk "BEGIN { print $a / $b }")"
  done
done
