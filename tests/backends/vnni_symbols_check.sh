#!/bin/sh
# Fails unless the object file $1 (the library's AVX-512 VNNI kernels) defines exactly
# two external symbols, the kernels themselves. Anything else it exports, an inline
# function or a template from a header, is AVX-512 code that the linker may keep as
# the one copy every caller runs (backends/src/models/block_dot_vnni.cpp).
set -eu
object="$1"
exported=$(nm -C --defined-only --extern-only "$object" | awk '{ $1 = ""; $2 = ""; sub(/^ +/, ""); print }')
kernels=$(printf '%s\n' "$exported" | grep -c '^canopy::backends::avx512_vnni::dot_q[48]_0(' || true)
others=$(printf '%s\n' "$exported" | grep -v '^canopy::backends::avx512_vnni::dot_q[48]_0(' | grep -v '^$' || true)
if [ -n "$others" ]; then
  echo "$object exports more than its kernels (AVX-512 code other callers could get):"
  printf '%s\n' "$others"
  exit 1
fi
if [ "$kernels" -ne 2 ]; then
  echo "$object should export dot_q8_0 and dot_q4_0; it exports:"
  printf '%s\n' "$exported"
  exit 1
fi
echo "$object exports its two kernels and nothing else"
