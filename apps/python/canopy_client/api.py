"""The bodies of ``canopy serve``'s requests and the readings of its JSON answers.

Kept apart from the transport so that what is sent can be checked without a server.
Semantics follow genlm-backend's ``AsyncLM`` where the server's differ (noted here).
"""

import operator
import secrets

JSON = "application/json"
BINARY = "application/octet-stream"
WIRE_DTYPES = ("float32", "float16")
MAX_CACHE_SALT_BYTES = 256  # the server's limit


def check_cache_salt(cache_salt):
    """``cache_salt`` as the server takes it: None, or a non-empty str of at most
    MAX_CACHE_SALT_BYTES bytes (UTF-8)."""
    if cache_salt is None:
        return None
    if not isinstance(cache_salt, str) or not cache_salt:
        raise ValueError(f"cache_salt must be a non-empty str, not {cache_salt!r}")
    if len(cache_salt.encode()) > MAX_CACHE_SALT_BYTES:
        raise ValueError(f"cache_salt has {len(cache_salt.encode())} bytes, more than "
                         f"the server's limit of {MAX_CACHE_SALT_BYTES}")
    return cache_salt


def scoped(body, cache_salt, adapter):
    """``body`` with its ``cache_salt`` (the request's queries then share cached rows
    and KV only with requests of the same tenant and salt) and its LoRA ``adapter``
    (the queries run under it; None: the base model)."""
    if cache_salt is not None:
        body["cache_salt"] = cache_salt
    if adapter is not None:
        body["adapter"] = adapter
    return body


def token_list(token_ids):
    """``token_ids`` (ints, numpy ints, a 1-D tensor...) as a list of Python ints.

    Floats are refused rather than truncated: a float id is a caller's bug.
    """
    return [operator.index(token) for token in token_ids]


def logprobs_body(sequences, batch, all_positions=False, dtype="float32"):
    """POST /v1/logprobs: one sequence as "tokens", or several as "batch"."""
    body = {"batch": sequences} if batch else {"tokens": sequences[0]}
    if all_positions:
        body["all_positions"] = True
    if dtype != "float32":
        body["dtype"] = dtype
    return body


def sample_body(prompts, batch, max_tokens, eos_token_ids, temperature, seed):
    """POST /v1/sample. ``seed=None`` draws a fresh seed, so unseeded calls differ as
    genlm-backend's do (the server alone would use seed 0 every time)."""
    body = {"batch": prompts} if batch else {"tokens": prompts[0]}
    body.update(max_tokens=operator.index(max_tokens),
                eos_token_ids=token_list(eos_token_ids),
                temperature=float(temperature),
                seed=secrets.randbits(64) if seed is None else operator.index(seed))
    return body


BYTE_REDUCTIONS = ("sum", "max")


def check_next_byte_question(prefix, reduce):
    """Raises for a prefix that is not bytes or an unknown reduction: the caller's
    mistake, found before anything is sent."""
    if reduce not in BYTE_REDUCTIONS:
        raise ValueError(f"reduce must be one of {BYTE_REDUCTIONS}, not {reduce!r}")
    if not isinstance(prefix, (bytes, bytearray)):
        raise TypeError(f"prefix must be bytes, not {type(prefix).__name__}")


def next_byte_body(questions, batch, reduce):
    """POST /v1/next_byte: ``questions`` are (token_ids, prefix bytes) pairs; one as
    "tokens" and "prefix", several as "batch"."""
    items = []
    for token_ids, prefix in questions:
        check_next_byte_question(prefix, reduce)
        items.append({"tokens": token_list(token_ids), "prefix": bytes(prefix).hex()})
    body = {"batch": items} if batch else dict(items[0])
    body["reduce"] = reduce
    return body


def _log(value):
    """A log value of a next-byte answer: null stands for log 0."""
    return float("-inf") if value is None else float(value)


def next_byte_answer(answer, to_array):
    """One next-byte answer as a dict: ``logprobs`` (float64 ``[256]``, -inf for no
    token), ``end_of_token``, ``eos`` (None after a non-empty prefix) and ``log_mass``."""
    import numpy as np

    return {
        "logprobs": to_array(np.array([_log(x) for x in answer["logprobs"]], dtype=np.float64)),
        "end_of_token": _log(answer["end_of_token"]),
        "eos": None if answer["eos"] is None else float(answer["eos"]),
        "log_mass": _log(answer["log_mass"]),
    }


def generated_ids(tokens, eos_token_ids):
    """The generated ids without the EOS that ended them.

    The engine returns a drawn EOS as the last id; genlm-backend's ``sample`` stops
    before appending it, and callers of this client expect that.
    """
    if tokens and tokens[-1] in eos_token_ids:
        return tokens[:-1]
    return tokens
