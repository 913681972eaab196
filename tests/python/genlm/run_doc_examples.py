"""run_doc_examples.py PAGE WORK: the genlm examples of a docs page (docs/models.md), run as written.

Each Python block that follows a ``<!-- genlm example: NAME -->`` line is run from the
repository root in a fresh interpreter, with genlm's packages importable (a copy of
../shared/third_party in WORK, prepare_genlm.sh), as a user who installed them runs it.
Two literals change, for where this run's files are: "../shared/" becomes
$CANOPY_SHARED_DIR, "build/apps/canopy/canopy" $CANOPY_CLI. The one shim is Debian
torch's missing MKL (debian_torch.py), which pip's torch does not need. An example
passes when it exits 0 and prints something; its output is shown either way.

Exit 77 (skip) without ../shared, 1 then when CANOPY_REQUIRE_FIXTURES=1.
"""

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MARK = re.compile(r"^<!-- genlm example: (.+?) -->\n```python\n(.*?)^```", re.M | re.S)
PRELUDE = "import debian_torch; debian_torch.route_csr_products_through_coo()\n"


def main(page, work):
    shared = os.environ.get("CANOPY_SHARED_DIR", "")
    if not os.path.isdir(os.path.join(shared, "third_party")):
        print(f"genlm's sources not found (CANOPY_SHARED_DIR={shared!r})")
        return 1 if os.environ.get("CANOPY_REQUIRE_FIXTURES") == "1" else 77
    with open(page) as text:
        examples = MARK.findall(text.read())
    if not examples:
        print(f"no '<!-- genlm example: NAME -->' blocks in {page}")
        return 1
    path = subprocess.run(["sh", os.path.join(HERE, "prepare_genlm.sh"), work, shared,
                           sys.executable], check=True, capture_output=True, text=True).stdout
    env = dict(os.environ, PYTHONPATH=path.strip(), PYTHONDONTWRITEBYTECODE="1")
    failed = []
    for name, code in examples:
        code = (code.replace("../shared/", shared.rstrip("/") + "/")
                    .replace("build/apps/canopy/canopy", os.environ["CANOPY_CLI"]))
        run = subprocess.run([sys.executable, "-c", PRELUDE + code], cwd=os.path.dirname(page),
                             env=env, capture_output=True, text=True, timeout=600)
        ok = run.returncode == 0 and run.stdout.strip()
        print(f"== {name}: {'ok' if ok else f'FAILED (exit {run.returncode})'}\n"
              f"{run.stdout}{run.stderr}")
        if not ok:
            failed.append(name)
    print(f"{len(examples) - len(failed)} of {len(examples)} examples ran"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])))
