#!/bin/sh
# package_install_test.sh SOURCE_DIR WORK_DIR PYTHON
# `pip install ./apps/python` as a user does it (into a fresh virtual environment, from a
# copy of the folder, offline: Debian's setuptools builds it), then the genlm-style tests
# against stories260K with the installed package, not the source tree, on the path.
set -eu
source=$1 work=$2 python=$3
rm -rf "$work"
mkdir -p "$work"
cp -r "$source/apps/python" "$work/src"
"$python" -m venv --system-site-packages "$work/venv"
# --system-site-packages shows the base interpreter's packages; where PYTHON is itself a
# virtual environment's (a GPU machine's torch venv), its numpy is linked in by a .pth.
if ! "$work/venv/bin/python" -c 'import numpy' 2>/dev/null; then
  "$python" -c 'import numpy, os; print(os.path.dirname(os.path.dirname(numpy.__file__)))' \
    >"$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/numpy-of-python.pth"
fi
"$work/venv/bin/pip" install --quiet --no-build-isolation --no-index "$work/src"
cd "$work"
"$work/venv/bin/python" - "$work/venv" <<'PY'
import importlib.metadata, sys
import canopy_client
from canopy_client import CanopyLM
assert canopy_client.__file__.startswith(sys.argv[1]), canopy_client.__file__
assert importlib.metadata.requires("canopy-client")[0] == "numpy"
for name in ["tokenizer", "byte_vocab", "str_vocab", "next_token_logprobs",
             "batch_next_token_logprobs", "next_token_logprobs_uncached",
             "reset_async_queries", "sample", "batch_sample", "clear_cache",
             "clear_kv_cache", "cache_kv", "from_name"]:
    assert hasattr(CanopyLM, name), name
print("installed:", canopy_client.__file__)
PY
PYTHONPATH="$source/tests/python" PYTHONDONTWRITEBYTECODE=1 \
  "$work/venv/bin/python" -m unittest -v test_genlm_stories260k
