#!/bin/sh
# run_genlm_tests.sh WORK MODEL EXPECTED PACKAGE TEST...
# genlm's own test files (TEST..., relative to ../shared/third_party/PACKAGE), unchanged,
# run by pytest over CanopyLM: canopy_genlm_plugin.py serves MODEL with `canopy serve`
# ($CANOPY_CLI) and hands genlm's model loaders a CanopyLM of it; EXPECTED lists the
# tests expected to fail for reasons not Canopy's.
#
# ../shared/third_party is copied into WORK once per change of it (arsenal's two Cython
# heaps are compiled in the copy, so ../shared stays as it is); concurrent runs wait for
# one copy. Without ../shared this skips (77), or fails when CANOPY_REQUIRE_FIXTURES=1.
set -eu
work=$1 model=$2 expected=$3 package=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
python=${CANOPY_PYTHON3:-/usr/bin/python3}
shared=${CANOPY_SHARED_DIR:-}
if [ -z "$shared" ] || [ ! -d "$shared/third_party/$package" ] || [ ! -e "$model" ]; then
  echo "genlm's sources or the model not found (CANOPY_SHARED_DIR='$shared', model $model)"
  [ "${CANOPY_REQUIRE_FIXTURES:-}" = 1 ] && exit 1
  exit 77
fi

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
    ) >"$work/cython.log" 2>&1 || { cat "$work/cython.log"; exit 1; }
    echo "$stamp" >"$work/ready"
  fi
) 9>"$work/lock"

tp=$work/third_party
PYTHONPATH=$here:$here/stand_ins:$here/../../../apps/python
for folder in arsenal interegular json-stream/src genlm-grammar genlm-backend genlm-bytes \
              genlm-control llamppl; do
  PYTHONPATH=$PYTHONPATH:$tp/$folder
done
export PYTHONPATH PYTHONDONTWRITEBYTECODE=1 CANOPY_GENLM_MODEL=$model CANOPY_GENLM_EXPECTED=$expected
cd "$tp/$package"
exec "$python" -m pytest -p canopy_genlm_plugin -p no:cacheprovider -q -rfEX --rootdir . \
  --timeout 300 "$@"
