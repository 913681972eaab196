#!/bin/sh
# check-format.sh ROOT: every C++ file git tracks under ROOT is as .clang-format lays it
# out, by Debian bookworm's clang-format 14 (other versions lay some lines out otherwise,
# so they skip). ctest `clang_format_check` runs it; `scripts/check-format.sh . --fix`
# rewrites the files in place instead. Exit 77: skipped (no clang-format 14, no git).
# Takes about 20 s on 2 cores.
set -eu
root=$1
fix=${2:-}
if ! command -v clang-format >/dev/null 2>&1; then
  echo "clang-format not found (scripts/install-deps.sh installs it): skipped"; exit 77
fi
if ! clang-format --version | grep -q "version 14\."; then
  echo "formatting is checked with clang-format 14 (Debian bookworm); this is $(clang-format --version): skipped"
  exit 77
fi
if ! git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
  echo "$root is not a git checkout: skipped"; exit 77
fi
cd "$root"
files=$(git ls-files '*.cpp' '*.hpp' | grep -v -e node_modules -e third_party)
if [ "$fix" = "--fix" ]; then
  # Twice: trailing comments settle in a second pass.
  echo "$files" | xargs clang-format -i
  echo "$files" | xargs clang-format -i
  exit 0
fi
bad=0
for f in $files; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "not formatted: $f (scripts/check-format.sh . --fix)"
    bad=1
  fi
done
exit $bad
