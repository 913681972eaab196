"""Python client for ``canopy serve``: genlm-backend's ``AsyncLM`` over HTTP.

    from canopy_client import CanopyLM
    lm = CanopyLM("http://127.0.0.1:8080")
    row = lm.next_token_logprobs_sync([1, 403, 407])   # float32 [vocab]
"""

from .errors import CanopyError, CanopyProtocolError, CanopyRequestError
from .lm import CanopyLM
from .wire import LogprobAnswer, decode_logprobs

__all__ = ["CanopyLM", "CanopyError", "CanopyProtocolError", "CanopyRequestError", "LogprobAnswer", "decode_logprobs"]
