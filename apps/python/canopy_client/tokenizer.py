"""``CanopyTokenizer``: the parts of a Hugging Face tokenizer that genlm-backend,
genlm-control, genlm-bytes and llamppl call, answered by the server's tokenizer.

Token strings are the byte-level spelling of each token's bytes (GPT-2's alphabet: one
character per byte, ``byte_decoder`` maps them back), control tokens their names; for
GPT-2 they are GPT-2's own. genlm-backend's ``get_byte_vocab`` (which genlm-bytes calls,
and ``decode_vocab``) reads a slow tokenizer through ``byte_decoder`` when encoding and
spelling a test string round-trips, else through ``sp_model`` as for SentencePiece
tokenizers, whose dummy prefix space breaks that round trip: both are here, and either
way it gets exactly ``CanopyLM.byte_vocab``.
"""

import re

from . import chat_template


def _byte_level_alphabet():
    """GPT-2's byte-level alphabet: a byte that is a printable Latin-1 character stands
    for itself, the others take the code points from 256 on, in byte order."""
    printable = {*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)}
    alphabet, extra = [], 0
    for byte in range(256):
        if byte in printable:
            alphabet.append(chr(byte))
        else:
            alphabet.append(chr(256 + extra))
            extra += 1
    return alphabet


_BYTE_TO_CHAR = _byte_level_alphabet()
_CHAR_TO_BYTE = {char: byte for byte, char in enumerate(_BYTE_TO_CHAR)}


_UTF8_OR_BYTE = re.compile(rb"[\x00-\x7f]|[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}"
                           rb"|[\xf0-\xf4][\x80-\xbf]{3}|.", re.DOTALL)


# A literal U+2581 would come back as a space, and "<" could start a "<0xXX>": both are
# spelled as their bytes, so that every piece reads back as exactly the token's bytes.
_SPELLED_AS_BYTES = {"\u2581", "<"}


class _SentencePieceSpelling:
    """``sp_model.id_to_piece`` as genlm reads it: the token's bytes with spaces as
    U+2581 and each byte outside valid UTF-8 as ``<0xXX>``, which genlm turns back into
    the same bytes."""

    def __init__(self, lm):
        self._lm = lm

    def id_to_piece(self, token_id):
        pieces = []
        for unit in _UTF8_OR_BYTE.findall(bytes(self._lm.byte_vocab[token_id])):
            try:
                text = unit.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            if text is None or text in _SPELLED_AS_BYTES:
                pieces.append("".join(f"<0x{byte:02X}>" for byte in unit))
            else:
                pieces.append("\u2581" if text == " " else text)
        return "".join(pieces)


class CanopyTokenizer:
    """The tokenizer of the model a ``CanopyLM`` serves (a slow tokenizer: ``is_fast``
    is False, so genlm reads it as it is rather than reloading one by name)."""

    is_fast = False
    byte_decoder = _CHAR_TO_BYTE

    def __init__(self, lm):
        self._lm = lm
        self._strings = None
        self._ids = None
        self._bpe_ranks = None
        self._chat_templates = None
        self.sp_model = _SentencePieceSpelling(lm)

    # -- text ------------------------------------------------------------------------

    def encode(self, text, add_special_tokens=True):
        """Ids of ``text``; with ``add_special_tokens`` what the tokenizer adds around it
        (BOS, its template), as transformers' ``encode``."""
        return self._lm._tokenize(text, add_special_tokens)

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": self.encode(text, add_special_tokens)}

    def decode(self, token_ids, skip_special_tokens=False):
        """The text of ``token_ids`` as the model's tokenizer decodes it (tokenizer.json:
        its decoders; llama2.c: no leading space after BOS), invalid UTF-8 replaced.
        Control tokens add no text, so ``skip_special_tokens`` changes nothing (where
        transformers would write "<s>" without it)."""
        return self._lm.detokenize([int(i) for i in token_ids]).decode("utf-8", errors="replace")

    def batch_decode(self, sequences, skip_special_tokens=False):
        return [self.decode(ids, skip_special_tokens) for ids in sequences]

    # -- chats -------------------------------------------------------------------------

    def _templates(self):
        """``{name: Jinja source}`` from ``GET /v1/tokenizer/chat_templates``, fetched once."""
        if self._chat_templates is None:
            answer = self._lm._run(self._lm._get_json("/v1/tokenizer/chat_templates"))
            self._chat_templates = answer["chat_templates"]
        return self._chat_templates

    @property
    def chat_template(self):
        """The model's chat template as transformers holds it: its source, ``{name:
        source}`` when the tokenizer_config.json names several, None when it has none."""
        templates = self._templates()
        if not templates:
            return None
        return templates["default"] if list(templates) == ["default"] else dict(templates)

    def apply_chat_template(self, conversation, **kwargs):
        """transformers' ``apply_chat_template`` with the model's template (rendered
        with Jinja2 in a sandbox, see ``chat_template``): the chat's token ids by
        default, its text with ``tokenize=False``; ``add_generation_prompt``,
        ``continue_final_message``, ``tools``, ``documents``, ``chat_template`` (a name
        or a template), ``return_dict`` and the template's own variables
        (``enable_thinking``) as there."""
        return chat_template.apply(self, self._templates(), conversation, **kwargs)

    # -- the vocabulary ----------------------------------------------------------------

    def token_strings(self):
        """Every id's token string (see the module's note), fetched once."""
        if self._strings is None:
            special = self._lm.special_tokens
            self._strings = [special[i] if i in special
                             else "".join(_BYTE_TO_CHAR[b] for b in bytes(token))
                             for i, token in enumerate(self._lm.byte_vocab)]
        return self._strings

    def convert_ids_to_tokens(self, token_ids):
        strings = self.token_strings()
        if isinstance(token_ids, int):
            return strings[token_ids]
        return [strings[int(i)] for i in token_ids]

    def _ids_by_string(self):
        """``{token string: id}``, built once; where ids share a string, the lowest id."""
        if self._ids is None:
            ids = {}
            for i, string in enumerate(self.token_strings()):
                ids.setdefault(string, i)
            self._ids = ids
        return self._ids

    def convert_tokens_to_ids(self, tokens):
        """Ids of token strings (None for a string that is no token). Ids that spell the
        same bytes share a string, which names the lowest of them."""
        ids = self._ids_by_string()
        if isinstance(tokens, str):
            return ids.get(tokens)
        return [ids.get(token) for token in tokens]

    def get_vocab(self):
        """``{token string: id}`` (a fresh dict, as transformers gives); where ids share a
        string, the lowest id."""
        return dict(self._ids_by_string())

    @property
    def bpe_ranks(self):
        """A byte-pair encoding's merges as a slow GPT-2 tokenizer has them:
        ``{(left string, right string): rank}``, rank 0 first applied (from
        ``GET /v1/tokenizer/merges``, fetched once); empty for tokenizers that merge by
        score (llama2.c, SentencePiece). genlm-control's canonical tokenization reads it."""
        if self._bpe_ranks is None:
            strings = self.token_strings()
            merges = self._lm._run(self._lm._get_json("/v1/tokenizer/merges"))["merges"]
            self._bpe_ranks = {(strings[left], strings[right]): rank
                               for rank, (left, right, _) in enumerate(merges)}
        return self._bpe_ranks

    def get_added_vocab(self):
        """The control tokens, ``{name: id}``."""
        return {name: i for i, name in self._lm.special_tokens.items()}

    @property
    def all_special_ids(self):
        return sorted(self._lm.special_tokens)

    @property
    def all_special_tokens(self):
        special = self._lm.special_tokens
        return [special[i] for i in sorted(special)]

    @property
    def eos_token_id(self):
        ids = self._lm.model_info.get("eos_token_ids") or []
        return ids[0] if ids else None

    @property
    def eos_token_ids(self):
        return list(self._lm.model_info.get("eos_token_ids") or [])

    @property
    def bos_token_id(self):
        return self._lm.model_info.get("bos_token_id")

    @property
    def eos_token(self):
        return None if self.eos_token_id is None else self.convert_ids_to_tokens(self.eos_token_id)

    @property
    def bos_token(self):
        return None if self.bos_token_id is None else self.convert_ids_to_tokens(self.bos_token_id)

    @property
    def special_tokens_map(self):
        """The special tokens' strings by role, as a template reads them (``bos_token``)."""
        named = {"bos_token": self.bos_token, "eos_token": self.eos_token}
        return {role: token for role, token in named.items() if token is not None}

    @property
    def name_or_path(self):
        return self._lm.model_info["name"]

    @property
    def vocab_size(self):
        return self._lm.vocab_size

    def __len__(self):
        return self._lm.vocab_size
