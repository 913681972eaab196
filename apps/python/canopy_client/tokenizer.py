"""``CanopyTokenizer``: the parts of a Hugging Face tokenizer that genlm code reads
(``encode``, ``decode``, ``eos_token_id``, ``bos_token_id``...), answered by the server's
tokenizer."""


class CanopyTokenizer:
    """The tokenizer of the model a ``CanopyLM`` serves."""

    def __init__(self, lm):
        self._lm = lm

    def encode(self, text, add_special_tokens=True):
        """Ids of ``text``; with ``add_special_tokens`` what the tokenizer adds around it
        (BOS, its template), as transformers' ``encode``."""
        return self._lm._tokenize(text, add_special_tokens)

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": self.encode(text, add_special_tokens)}

    def decode(self, token_ids, skip_special_tokens=False):
        """The text of ``token_ids`` as the model's tokenizer decodes it (tokenizer.json:
        its decoders, so Llama 2 drops the leading space), invalid UTF-8 replaced;
        control tokens are written as their names unless ``skip_special_tokens``."""
        special = self._lm._special_ids
        ids = [int(i) for i in token_ids if not (skip_special_tokens and int(i) in special)]
        return self._lm.detokenize(ids).decode("utf-8", errors="replace")

    def convert_ids_to_tokens(self, token_ids):
        vocab = self._lm.str_vocab
        if isinstance(token_ids, int):
            return vocab[token_ids]
        return [vocab[i] for i in token_ids]

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
        return None if self.eos_token_id is None else self._lm.str_vocab[self.eos_token_id]

    @property
    def bos_token(self):
        return None if self.bos_token_id is None else self._lm.str_vocab[self.bos_token_id]

    @property
    def name_or_path(self):
        return self._lm.model_info["name"]

    @property
    def vocab_size(self):
        return self._lm.vocab_size

    @property
    def is_fast(self):
        return False

    def __len__(self):
        return self._lm.vocab_size
