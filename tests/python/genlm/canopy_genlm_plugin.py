"""pytest plugin: genlm's own test files, unchanged, over ``CanopyLM``.

genlm's tests build their models by name (``PromptedLLM.from_name("gpt2", backend="hf")``,
``load_model_by_name(...)``, llamppl's ``CachedCausalLM.from_pretrained``). This plugin
changes only that: a ``canopy serve`` for the model in $CANOPY_GENLM_MODEL starts with the
session, and every model genlm's code loads by name is a ``CanopyLM`` client of it (for
llamppl, a ``CanopyCausalLM``, the client's documented way to run llamppl). With
$CANOPY_GENLM_SERVE set to "mock", $CANOPY_GENLM_MODEL names a tokenizer folder and the
server runs the mock model over it (a real vocabulary without weights).

$CANOPY_GENLM_EXPECTED names a file of tests expected to fail for a reason that is not
Canopy's, one per line: ``test id  # reason``. Each is marked xfail(strict), so a listed
test that passes fails the run (its line must then go), and a failure not listed fails it.
A reason that starts with "(some examples)" marks a property test that fails only for some
of the examples Hypothesis draws: xfail, not strict.

Hypothesis draws the same examples every run (derandomize) and keeps no database, so a
run's outcome does not depend on earlier runs on the same machine.
"""

import os
import sys

import hypothesis
import pytest

from canopy_client import CanopyLM
from canopy_client.local_server import LocalServer
from debian_torch import route_csr_products_through_coo

_server = None
_clients = []


# genlm-backend's and genlm-control's loaders refuse other backend names, and so does
# this one; the name and the backend's options are not used.
_BACKENDS = (None, "vllm", "hf", "mock", "mlx", "sgl")


def canopy_lm(name=None, backend=None, **_options):
    """What genlm's model loaders return here: a client of the served model."""
    if backend not in _BACKENDS:
        raise ValueError(f"Invalid backend: {backend}")
    lm = CanopyLM(_server.url, array="torch", timeout=300)
    _clients.append(lm)
    return lm


def pytest_configure(config):
    global _server
    route_csr_products_through_coo()
    hypothesis.settings.register_profile("canopy", derandomize=True, database=None)
    hypothesis.settings.load_profile("canopy")
    model = os.environ["CANOPY_GENLM_MODEL"]
    if os.environ.get("CANOPY_GENLM_SERVE") == "mock":
        _server = LocalServer("--backend", "mock", "--tokenizer", model).start()
    else:
        _server = LocalServer("--model", model).start()
    import genlm.backend  # noqa: F401 (imports its loaders' modules)
    import genlm.control  # noqa: F401

    # Every genlm module's name for a model loader (genlm.backend re-exports
    # genlm.backend.llm's; genlm-control has its own): test modules import them later.
    for name, module in list(sys.modules.items()):
        if name.startswith("genlm.") and hasattr(module, "load_model_by_name"):
            module.load_model_by_name = canopy_lm

    from llamppl.llms import CachedCausalLM
    from canopy_client.llamppl import CanopyCausalLM

    CachedCausalLM.from_pretrained = classmethod(
        lambda cls, *args, **kwargs: CanopyCausalLM(canopy_lm()))


def pytest_unconfigure(config):
    for lm in _clients:
        lm.close()
    if _server is not None:
        _server.stop()


def expected_failures():
    path = os.environ.get("CANOPY_GENLM_EXPECTED")
    if not path:
        return {}
    listed = {}
    with open(path) as lines:
        for line in lines:
            test_id, _, reason = line.partition("#")
            if test_id.strip():
                listed[test_id.strip()] = reason.strip()
    return listed


def pytest_collection_modifyitems(config, items):
    listed = expected_failures()
    for item in items:
        reason = listed.pop(item.nodeid, None)
        if reason is not None:
            strict = not reason.startswith("(some examples)")
            item.add_marker(pytest.mark.xfail(reason=reason, strict=strict))
    if listed:
        raise pytest.UsageError("listed as expected to fail but not collected: "
                                + ", ".join(sorted(listed)))
