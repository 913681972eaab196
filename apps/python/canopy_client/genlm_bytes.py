"""genlm-bytes' byte-level beam over Canopy's next-byte distributions (``POST /v1/next_byte``).
Needs genlm-bytes and torch; genlm-bytes itself is unchanged.

    from genlm.bytes import BeamParams
    from canopy_client.genlm_bytes import next_byte_beam
    beam = await next_byte_beam(lm, BeamParams(K=5, eos_tokens=[b"<|endoftext|>"]))
    beam = await beam.prefill(b"An apple a day")          # a genlm.bytes.ByteBeamState

Over its own trie, every state genlm-bytes' beam materializes fetches a whole token row
(Llama 3: 513 KB) and sums it over a byte trie of the vocabulary (a sparse product over
every prefix of every token, 1.1 M non-zeros for Llama 3), and then reads the masses of the
few nodes the state walks through. Here those reads are answered by the server instead: the
masses under a node are one next-byte answer for the node's bytes (256 numbers, made from
the row the server caches and kept beside it), fetched when the state first reads them. No
row reaches the client and no sum over the vocabulary runs in it.

How it plugs in without changing genlm-bytes: ``LazyTrieState.materialize`` computes
``torch.log(trie.weight_sum(torch.exp(await model.next_token_logprobs(context)), mode))
.cpu().numpy()`` and indexes the result by trie node. ``next_byte_beam`` hands it a model
whose ``next_token_logprobs`` answers a ``PendingRow`` (the context; nothing fetched) and a
trie whose ``weight_sum`` answers masses read on demand. Both take part in torch's functions
(``__torch_function__``) only as far as that expression needs, and refuse any other. The
trie's nodes are genlm-bytes' own ``TokenByteTrie``'s, so node numbers, children and
everything else the beam and its healing read are as over its own trie.

Thread contract: as genlm-bytes' own objects, one event loop uses a beam; a mass read that
needs an answer blocks that loop for one request (the client's ``next_byte_logprobs_sync``),
as genlm's own trie blocks it for its sparse product.

Where the masses differ from genlm-bytes' own trie's, by Canopy's contract
(docs/http-api.md): a control token is not text, so no mass is spelled by a control token's
name (genlm-bytes' trie spells "<s>" as three bytes), and control tokens other than EOS carry
no mass at all. EOS tokens carry theirs as in genlm-bytes: at the EOS node in mode WITH_EOS
when the beam names them (``BeamParams.eos_tokens`` must then be the model's EOS tokens: the
answer carries their sum), and otherwise along their spelling, for a model with one EOS
token; with several, their mass is in the root's total only, since the answer does not
split it between their spellings.
"""

import numpy as np
import torch
from genlm.backend.tokenization.bytes import get_byte_vocab
from genlm.bytes import ByteBeamState, TokenByteTrie
from genlm.bytes.byte_lm.lm_state import StatefulTokenizedLM
from genlm.bytes.byte_lm.trie_state import LazyTrieState
from genlm.bytes.trie import TrieMode


async def next_byte_beam(lm, params, trie_options=None):
    """genlm-bytes' ``ByteBeamState.initial(lm, params, trie_options)``, its masses
    answered by the server: ``lm`` a ``CanopyLM``, ``params`` genlm-bytes'
    ``BeamParams``."""
    trie = NextByteTrie(lm, eos_tokens=params.eos_tokens, **(trie_options or {}))
    state = LazyTrieState.initial(NextByteModel(lm), trie, mode=TrieMode.WITH_EOS)
    return ByteBeamState([await state.materialize()], params)


class PendingRow:
    """A next-token distribution not fetched: the context it follows. ``torch.exp`` of
    it is itself (the trie reads the distribution whichever form it is asked in)."""

    def __init__(self, token_ids):
        self.token_ids = list(token_ids)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.exp and len(args) == 1 and not kwargs:
            return args[0]
        raise TypeError(f"a PendingRow (canopy_client.genlm_bytes) takes part in torch.exp "
                        f"only, not in {getattr(func, '__name__', func)}")


class NextByteModel:
    """The model a ``LazyTrieState`` asks: a ``CanopyLM`` whose ``next_token_logprobs``
    answers a ``PendingRow`` instead of fetching the row."""

    def __init__(self, lm):
        self.lm = lm

    @property
    def tokenizer(self):
        return self.lm.tokenizer

    @property
    def byte_vocab(self):
        return self.lm.byte_vocab

    async def next_token_logprobs(self, token_ids):
        return PendingRow(token_ids)


class NextByteTrie:
    """genlm-bytes' ``AsyncTokenByteTrie``, its ``weight_sum`` answered by the server.

    Args:
        lm: a ``CanopyLM``.
        eos_tokens: as genlm-bytes' ``TokenByteTrie``: none, or the model's EOS tokens.
        trie_options: more of ``TokenByteTrie``'s arguments (``device``); not
            ``atomic_tokens``, which the server's byte answers cannot follow.
    """

    def __init__(self, lm, eos_tokens=None, **trie_options):
        if trie_options.get("atomic_tokens"):
            raise ValueError("atomic_tokens: the server's next-byte answers spell every "
                             "token byte by byte")
        self.lm = lm
        self.trie = TokenByteTrie(decode=get_byte_vocab(lm.tokenizer), eos_tokens=eos_tokens,
                                  **trie_options)
        model_eos = sorted(lm.model_info["eos_token_ids"])
        named = sorted(self.trie.eos_token_ids)
        if named and named != model_eos:
            raise ValueError(f"eos_tokens name token ids {named}; the server's answers carry "
                             f"the mass of the model's EOS ids {model_eos}: name those or none")
        self.names_eos = bool(named)
        self.eos_spelling = bytes(self.trie.decode[model_eos[0]]) if len(model_eos) == 1 else None
        self.leaves = frozenset(int(node) for node in self.trie.token_id_to_leaf[:, 1])
        self.requests = 0  # next-byte answers fetched, for benchmarks and tests

    async def weight_sum(self, ws, mode=None):
        """The masses of every node for the distribution ``ws`` (a ``PendingRow``), read
        on demand; ``mode`` as genlm-bytes' (default WITHOUT_EOS)."""
        if not isinstance(ws, PendingRow):
            raise TypeError(f"NextByteTrie sums a PendingRow (NextByteModel's answer), "
                            f"not a {type(ws).__name__}: it never sees a row")
        self.requests += 1
        root = await self.lm.next_byte_logprobs(ws.token_ids)
        return SummedMasses(NodeMasses(self, ws.token_ids, mode or TrieMode.WITHOUT_EOS, root))

    async def weight_max(self, ws):
        raise NotImplementedError("NextByteTrie answers weight_sum, the one genlm-bytes' "
                                  "beam asks; lm.next_byte_logprobs(..., reduce='max') "
                                  "answers maxima")

    async def cleanup(self):
        """Nothing runs in the background here (genlm-bytes' trie stops its batcher)."""


class SummedMasses:
    """``weight_sum``'s answer: ``torch.log`` of it gives the log masses by node."""

    def __init__(self, log_masses):
        self._log_masses = log_masses

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.log and len(args) == 1 and not kwargs:
            return args[0]._log_masses
        raise TypeError(f"summed masses (canopy_client.genlm_bytes) take part in torch.log "
                        f"only, not in {getattr(func, '__name__', func)}")


class NodeMasses:
    """The log masses of a trie's nodes for one context, as genlm-bytes reads them
    (``mass[node]``), each node's from the next-byte answer of its parent's bytes (a
    leaf's: of its own), fetched once on first read."""

    def __init__(self, trie, token_ids, mode, root_answer):
        self._trie = trie
        self._token_ids = token_ids
        self._at_eos_node = mode is TrieMode.WITH_EOS and trie.names_eos
        self._answers = {b"": _Answer(root_answer)}
        root = self._answers[b""]
        self._log_eos = root.log_mass + root.eos

    def cpu(self):
        return self

    def numpy(self):
        return self

    def __getitem__(self, node):
        node = int(node)
        trie = self._trie
        if node == trie.trie.eos_node:
            return self._log_eos if self._at_eos_node else -np.inf
        prefix = bytes(trie.trie.node2prefix[node])
        leaf = node in trie.leaves
        if leaf:
            answer = self._answer(prefix)
            value = answer.log_mass + answer.end_of_token
        elif not prefix:
            return self._answers[b""].log_mass
        else:
            parent = self._answer(prefix[:-1])
            value = parent.log_mass + parent.logprobs[prefix[-1]]
        if self._spells_eos(prefix, leaf):
            value = np.logaddexp(value, self._log_eos)
        return value

    def _spells_eos(self, prefix, leaf):
        """Whether an EOS token's mass lies under this node: along its spelling, when
        it is not at the EOS node (mode WITHOUT_EOS or EOS not named)."""
        spelling = self._trie.eos_spelling
        if self._at_eos_node or spelling is None or not prefix:
            return False
        return prefix == spelling if leaf else spelling.startswith(prefix)

    def _answer(self, prefix):
        answer = self._answers.get(prefix)
        if answer is None:
            self._trie.requests += 1
            answer = self._answers[prefix] = _Answer(
                self._trie.lm.next_byte_logprobs_sync(self._token_ids, prefix))
        return answer


class _Answer:
    """One next-byte answer as plain floats: absolute log masses are ``log_mass`` plus
    the relative values."""

    __slots__ = ("logprobs", "end_of_token", "eos", "log_mass")

    def __init__(self, answer):
        self.logprobs = np.asarray(answer["logprobs"], dtype=np.float64)
        self.end_of_token = float(answer["end_of_token"])
        self.eos = -np.inf if answer["eos"] is None else float(answer["eos"])
        self.log_mass = float(answer["log_mass"])
