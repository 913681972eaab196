#!/bin/sh
# run_genlm_tests.sh WORK MODEL EXPECTED PACKAGE TEST...
# genlm's own test files (TEST..., relative to ../shared/third_party/PACKAGE), unchanged,
# run by pytest over CanopyLM: canopy_genlm_plugin.py serves MODEL with `canopy serve`
# ($CANOPY_CLI) and hands genlm's model loaders a CanopyLM of it; EXPECTED lists the
# tests expected to fail for reasons not Canopy's.
# With CANOPY_GENLM_SERVE=mock, MODEL is a tokenizer folder that the mock model serves.
#
# ../shared/third_party is copied into WORK (prepare_genlm.sh). Without ../shared this
# skips (77), or fails when CANOPY_REQUIRE_FIXTURES=1.
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

PYTHONPATH=$(sh "$here/prepare_genlm.sh" "$work" "$shared" "$python")
export PYTHONPATH PYTHONDONTWRITEBYTECODE=1 CANOPY_GENLM_MODEL=$model CANOPY_GENLM_EXPECTED=$expected
cd "$work/third_party/$package"
exec "$python" -m pytest -p canopy_genlm_plugin -p no:cacheprovider -q -rfEX --rootdir . \
  --timeout 300 "$@"
