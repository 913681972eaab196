#!/bin/sh
# prepare_genlm.sh WORK SHARED [PYTHON]
# A copy of SHARED/third_party (genlm's packages and their pure-Python dependencies) in
# WORK, with arsenal's two Cython heaps compiled in the copy so SHARED stays as it is;
# then prints the PYTHONPATH that imports them with CanopyLM: the client, genlm's
# folders, and the stand-ins for what Debian lacks (stand_ins/). Copies again only when
# SHARED/third_party changed; concurrent runs wait for one copy.
# Used by run_genlm_tests.sh and the genlm benchmarks (scripts/genlm_bench_support.py).
set -eu
work=$1 shared=$2 python=${3:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
stamp=$(find "$shared/third_party" -type f -printf '%P %s %T@\n' | sort | md5sum | cut -d' ' -f1)
(
  flock 9
  if [ "$(cat "$work/ready" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$work/third_party" "$work/ready"
    cp -r "$shared/third_party" "$work/third_party"
    (cd "$work/third_party/arsenal" && "$python" - <<'PY'
from Cython.Build import cythonize
from setuptools import setup
setup(ext_modules=cythonize(["arsenal/datastructures/heap/heap.pyx",
                             "arsenal/datastructures/heap/sumheap.pyx"],
                            language_level=3, quiet=True),
      script_args=["build_ext", "--inplace", "--quiet"])
PY
    ) >"$work/cython.log" 2>&1 || { cat "$work/cython.log" >&2; exit 1; }
    echo "$stamp" >"$work/ready"
  fi
) 9>"$work/lock"

tp=$work/third_party
path=$here:$here/stand_ins:$(cd "$here/../../../apps/python" && pwd)
for folder in arsenal interegular json-stream/src genlm-grammar genlm-backend genlm-bytes \
              genlm-control llamppl; do
  path=$path:$tp/$folder
done
echo "$path"
