"""An import-only stand-in for Hugging Face ``transformers`` in the genlm tests.

Debian bookworm does not package transformers and no Python registry is reachable here,
yet genlm-backend imports it at module level (``llm/hf.py``, ``tokenization/*.py``) even
where no HF model is used. Every name asked of this module is a class whose every use
(construction, ``from_pretrained``, any attribute) raises, so nothing that needs the real
library passes through it silently: a genlm test that does fails and is listed with that
reason.
"""


class _Unavailable:
    def __init__(self, *args, **kwargs):
        raise ImportError(f"transformers.{type(self).__name__}: the real transformers is not "
                          "installed (tests/python/genlm/stand_ins)")

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        raise ImportError(f"transformers.{cls.__name__}.from_pretrained: the real transformers "
                          "is not installed (tests/python/genlm/stand_ins)")


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return type(name, (_Unavailable,), {})
