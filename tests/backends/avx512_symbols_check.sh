#!/bin/sh
# Fails unless the object file $1 (one of the library's AVX-512 kernel files) defines
# exactly $3 external symbols, each matching the basic regular expression $2 (its
# kernels). Anything else it exports, an inline function or a template from a header,
# is AVX-512 code that the linker may keep as the one copy every caller runs
# (backends/src/models/block_dot_vnni.cpp, float_product_avx512.cpp).
set -eu
object="$1"
pattern="$2"
count="$3"
exported=$(nm -C --defined-only --extern-only "$object" | awk '{ $1 = ""; $2 = ""; sub(/^ +/, ""); print }')
kernels=$(printf '%s\n' "$exported" | grep -c "^$pattern" || true)
others=$(printf '%s\n' "$exported" | grep -v "^$pattern" | grep -v '^$' || true)
if [ -n "$others" ]; then
  echo "$object exports more than its kernels (AVX-512 code other callers could get):"
  printf '%s\n' "$others"
  exit 1
fi
if [ "$kernels" -ne "$count" ]; then
  echo "$object should export $count kernels matching $pattern; it exports:"
  printf '%s\n' "$exported"
  exit 1
fi
echo "$object exports its $count kernels and nothing else"
