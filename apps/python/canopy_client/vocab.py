"""Vocabularies as genlm-backend gives them: every id's bytes, control tokens spelled as
the tokenizer names them ("</s>"), each entry a ``Token`` (a ``bytes`` that also knows its
id, as genlm's own Token does)."""


class Token(bytes):
    """The bytes of one vocabulary entry, with ``token_id`` and ``byte_string``."""

    def __new__(cls, byte_string, token_id):
        token = super().__new__(cls, byte_string)
        token.token_id = token_id
        return token

    @property
    def byte_string(self):
        return bytes(self)


def genlm_byte_vocab(answer, vocab_size):
    """``GET /v1/vocab``'s answer as a list of ``Token``: bytes where the server gives
    them, else the control token's text (UTF-8), else ``b""``."""
    hex_entries = answer["vocab"]
    if len(hex_entries) != vocab_size:
        raise ValueError(f"the vocabulary has {len(hex_entries)} entries, not {vocab_size}")
    special = {int(token_id): text for token_id, text in answer.get("special_tokens", {}).items()}
    return [Token(bytes.fromhex(entry) if entry is not None else special.get(i, "").encode(), i)
            for i, entry in enumerate(hex_entries)]


def str_vocab(byte_vocab):
    """Each entry as text (invalid UTF-8 replaced by U+FFFD), as genlm's str_vocab."""
    return [bytes(token).decode("utf-8", errors="replace") for token in byte_vocab]
