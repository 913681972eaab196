"""llamppl over Canopy: ``CanopyCausalLM`` is llamppl's ``CachedCausalLM`` whose model is
a ``CanopyLM``. Needs llamppl (``pip install llamppl``); llamppl itself is unchanged.

    from canopy_client.llamppl import CanopyCausalLM
    lm = CanopyCausalLM.from_url("http://127.0.0.1:8080")   # then use it as llamppl's LLM

``CachedCausalLM.__init__`` takes only genlm-backend's own model classes (it names their
backend by type); this subclass sets the same attributes for a ``CanopyLM``, with
``backend`` "canopy". Everything else (masks, caching, ``next_token_logprobs``) is
llamppl's.
"""

from llamppl.llms import CachedCausalLM, Masks

from .lm import CanopyLM


class CanopyCausalLM(CachedCausalLM):
    def __init__(self, model):
        """``model``: a ``CanopyLM``."""
        if not isinstance(model, CanopyLM):
            raise TypeError(f"CanopyCausalLM wraps a CanopyLM, not {type(model).__name__}")
        self.backend = "canopy"
        self.model = model
        self.tokenizer = model.tokenizer
        self.str_vocab = model.str_vocab
        self.byte_vocab = model.byte_vocab
        self.masks = Masks(self)

    @classmethod
    def from_url(cls, url, **client_options):
        """A ``CanopyCausalLM`` over ``CanopyLM(url, **client_options)``."""
        return cls(CanopyLM(url, **client_options))

    @classmethod
    def from_pretrained(cls, model_id, backend=None, **kwargs):
        """A local ``canopy serve`` for ``model_id`` (``CanopyLM.from_name``), llamppl's
        constructor by name; ``backend`` is ignored (Canopy is the backend)."""
        return cls(CanopyLM.from_name(model_id, **kwargs))

    def close(self):
        """Closes the client (and stops the server ``from_pretrained`` started)."""
        self.model.close()
