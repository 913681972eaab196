"""Vocabularies as genlm-backend gives them: every id's bytes, control tokens spelled as
the tokenizer names them ("</s>"), each entry a ``Token``.

``Token`` is genlm-backend's own class when genlm-backend imports, so that genlm's
``isinstance`` checks, id-keyed dicts and deep copies take CanopyLM's vocabulary as
their own; without genlm-backend it is ``CanopyToken``, a class of the same behaviour
(written here, checked against genlm's in tests/python/test_vocab.py).
"""

import operator


def _by_id(compare):
    def method(self, other):
        if not isinstance(other, CanopyToken):
            return NotImplemented  # Python then compares the bytes
        return compare(self.token_id, other.token_id)
    return method


class CanopyToken(bytes):
    """One vocabulary entry: its bytes (a ``bytes``, so joins, slices and ``decode``
    work) and its ``token_id``.

    Two tokens are equal, hash and order by id, as genlm's are: two ids may spell
    the same bytes (stories260K has 88 such byte strings), and a vocabulary keyed by
    bytes would merge them. Against plain ``bytes`` a token compares by content.
    Copies, deep copies and pickles keep the id.
    """

    def __new__(cls, token_id, byte_string):
        if not isinstance(token_id, int):
            raise TypeError(f"token_id must be an int, not {type(token_id).__name__}")
        if not isinstance(byte_string, bytes):
            raise TypeError(f"byte_string must be bytes, not {type(byte_string).__name__}")
        token = super().__new__(cls, byte_string)
        token.token_id = token_id
        return token

    @property
    def byte_string(self):
        """The entry's bytes as a plain ``bytes``."""
        return bytes(self)

    def __repr__(self):
        return f"Token(token_id={self.token_id}, byte_string={bytes(self)!r})"

    __eq__ = _by_id(operator.eq)
    __ne__ = _by_id(operator.ne)
    __lt__ = _by_id(operator.lt)
    __le__ = _by_id(operator.le)
    __gt__ = _by_id(operator.gt)
    __ge__ = _by_id(operator.ge)

    def __hash__(self):
        return hash(self.token_id)

    def __reduce__(self):
        return (type(self), (self.token_id, bytes(self)))


try:
    from genlm.backend.tokenization.token import Token
except ImportError:
    Token = CanopyToken


def genlm_byte_vocab(answer, vocab_size):
    """``GET /v1/vocab``'s answer as a list of ``Token``: bytes where the server gives
    them, else the control token's text (UTF-8), else ``b""``."""
    hex_entries = answer["vocab"]
    if len(hex_entries) != vocab_size:
        raise ValueError(f"the vocabulary has {len(hex_entries)} entries, not {vocab_size}")
    special = {int(token_id): text for token_id, text in answer.get("special_tokens", {}).items()}
    return [Token(i, bytes.fromhex(entry) if entry is not None else special.get(i, "").encode())
            for i, entry in enumerate(hex_entries)]


def str_vocab(byte_vocab, token_strings):
    """Each entry as text: its bytes as UTF-8, else (invalid UTF-8) its token string, as
    genlm-backend's ``decode_vocab`` gives it by default."""
    texts = []
    for token, string in zip(byte_vocab, token_strings):
        try:
            texts.append(bytes(token).decode("utf-8"))
        except UnicodeDecodeError:
            texts.append(string)
    return texts
