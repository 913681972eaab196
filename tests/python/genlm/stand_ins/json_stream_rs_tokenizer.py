"""A stand-in for json-stream's optional Rust tokenizer, which no Debian package holds.

It says the extension is unavailable, as the real package does when its extension cannot
load, so json-stream takes its own pure-Python tokenizer (its documented fallback).
"""


class ExtensionException(Exception):
    pass


def rust_tokenizer_or_raise(*args, **kwargs):
    raise ExtensionException("json-stream's Rust tokenizer is not installed here")
