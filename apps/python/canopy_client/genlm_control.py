"""genlm-control's trie set samplers (``eager_token_sampler``, ``topk_token_sampler``) with the
masses of their trie's inner nodes answered by the server's next-byte distributions
(``POST /v1/next_byte``). Needs genlm-control; genlm-control itself is unchanged.

    llm = PromptedLLM(lm)                                   # lm: a CanopyLM
    sampler = eager_token_sampler(llm, BoolFSA.from_regex(r"[a-z ]+"))
    use_next_byte_masses(sampler)                           # then sample as before

A trie set sampler asks its potential for the next-token weights (the row, which it needs
for every token's weight anyway) and then sums or maximizes them over a character trie of
the whole vocabulary (a sparse product over every prefix of every token) before reading
the few nodes on the path it draws. Here those inner nodes are read from the server: a
node's children are one next-byte answer for the node's bytes, made from the row the
server caches and kept beside it, fetched when first read; the first, the root's, for all
the particles of one step in one request. Leaves are the token weights the sampler already
holds, read from its own weights.

Exactly the masses of genlm-control's own trie, with temperature 1: control tokens that
Canopy's answers never spell (a control token is not text) are spelled by their names in
genlm-control's vocabulary, and their weights, which the sampler holds, are added here along
their names; EOS is the trie's EOS item, its weight the sampler's.

How it plugs in: the sampler's trie executor is replaced by one whose ``weight_sum`` and
``weight_max`` read the masses on demand, and the potential's ``logw_next`` tags the weights
it returns with the token ids they follow (a numpy array subclass, kept by ``exp``), so the
executor knows what to ask. Anything else reaching the executor is refused.

Thread contract: as genlm-control's own samplers, one event loop uses a sampler; a node
read that needs an answer blocks that loop for one request (the client's
``next_byte_logprobs_sync``), as genlm's own trie blocks it for its sparse product.
"""

from collections import Counter

import numpy as np
from genlm.backend.tokenization import Token
from genlm.control.sampler.set import TopKSetSampler


def use_next_byte_masses(sampler):
    """Makes ``sampler`` (``eager_token_sampler``'s or ``topk_token_sampler``'s, over a
    ``PromptedLLM`` of a ``CanopyLM`` at temperature 1) read its trie's inner nodes from
    the server. Returns ``sampler``."""
    set_sampler = getattr(sampler, "set_sampler", sampler)
    llm = set_sampler.iter_potential
    lm = getattr(llm, "model", None)
    if not hasattr(lm, "next_byte_logprobs_sync"):
        raise TypeError("the sampler's potential must be a PromptedLLM of a CanopyLM, not "
                        f"{type(llm).__name__} of {type(lm).__name__}")
    if llm.temperature != 1:
        raise ValueError(f"temperature {llm.temperature}: the server's next-byte answers are "
                         "for the model's own distribution (temperature 1)")
    model_eos = sorted(lm.model_info["eos_token_ids"])
    if sorted(llm.token_maps.eos_idxs) != model_eos:
        raise ValueError(f"the PromptedLLM's EOS ids {sorted(llm.token_maps.eos_idxs)} are not "
                         f"the model's {model_eos}, whose mass the server's answers leave out")
    if isinstance(set_sampler, TopKSetSampler):
        shared = shared_byte_strings(llm, lm)
        if shared:
            raise ValueError(f"top-k over a vocabulary where ids share byte strings "
                             f"({len(shared)}, e.g. {sorted(shared)[0]!r}): the server's "
                             "maxima are per byte string, and its tokens' are not")
    _tag_weights_with_context(llm)
    set_sampler.trie_executor = NextByteTrieExecutor(lm, set_sampler.trie, llm)
    return sampler


def shared_byte_strings(llm, lm):
    """The byte strings that two non-control ids of the potential's vocabulary spell."""
    control = set(lm.special_tokens)
    counts = Counter(token.byte_string for token in llm.vocab
                     if isinstance(token, Token) and token.token_id not in control)
    return {spelling for spelling, count in counts.items() if count > 1}


class ContextWeights(np.ndarray):
    """Token weights that know the token ids they follow (``token_ids``); numpy's
    functions (``np.exp``) keep it."""

    def __array_finalize__(self, source):
        self.token_ids = getattr(source, "token_ids", None)


def _tag_weights_with_context(llm):
    """Wraps this ``PromptedLLM``'s ``logw_next`` (on the instance) so that its weights
    carry the ids the model was asked after."""
    if getattr(llm.logw_next, "tags_context", False):
        return
    plain = llm.logw_next

    async def logw_next(context):
        weights = await plain(context)
        tagged = np.asarray(weights.weights).view(ContextWeights)
        tagged.token_ids = list(llm.prompt_ids) + list(llm.encode_tokens(context))
        weights.weights = tagged
        return weights

    logw_next.tags_context = True
    llm.logw_next = logw_next


class NextByteTrieExecutor:
    """genlm-backend's ``AsyncTokenCharacterTrie`` for a set sampler, its inner nodes
    answered by the server (``weight_sum``: probabilities; ``weight_max``: log weights, as
    the samplers pass them)."""

    def __init__(self, lm, trie, llm):
        self.lm = lm
        self.trie = trie
        self.requests = 0  # next-byte answers fetched, for benchmarks and tests
        self.position_of_leaf = {int(leaf): int(i) for i, leaf in trie.idx_to_leaf}
        control = set(lm.special_tokens) - set(llm.token_maps.eos_idxs)
        # (name bytes, position in the sampler's weights) of each control token spelled in
        # the trie by its name.
        self.spelled_control = [
            (token.byte_string,
             self.position_of_leaf[int(trie.word2leaf[(token.byte_string, token.token_id)])])
            for token in trie.decode if isinstance(token, Token) and token.token_id in control]
        self.control_positions = frozenset(i for _, i in self.spelled_control)

    async def weight_sum(self, ws):
        return await self._masses(ws, "sum")

    async def weight_max(self, ws):
        return await self._masses(ws, "max")

    async def _masses(self, ws, reduce):
        token_ids = getattr(ws, "token_ids", None)
        if token_ids is None:
            raise TypeError("NextByteTrieExecutor reads weights that PromptedLLM.logw_next "
                            "returned after use_next_byte_masses (they carry their context)")
        self.requests += 1
        root = await self.lm.next_byte_logprobs(token_ids, reduce=reduce)
        return TrieMasses(self, token_ids, np.asarray(ws, dtype=np.float64), reduce, root)

    async def cleanup(self):
        """Nothing runs in the background here (genlm's trie stops its batcher)."""


class TrieMasses:
    """A set sampler's view of one weight vector's trie masses, by node: sums of the
    weights (``reduce`` "sum") or maxima of the log weights ("max"). Inner nodes come from
    the next-byte answer of the parent's bytes, leaves from the weights themselves."""

    def __init__(self, executor, token_ids, weights, reduce, root_answer):
        self._executor = executor
        self._token_ids = token_ids
        self._weights = weights
        self._reduce = reduce
        self._answers = {b"": root_answer}

    def __getitem__(self, node):
        node = int(node)
        executor = self._executor
        letters = executor.trie.node2prefix[node]
        if not all(isinstance(letter, int) for letter in letters):
            return self._eos()  # the EOS item's node or its leaf
        position = executor.position_of_leaf.get(node)
        if position is not None:
            return self._leaf(position, bytes(letters))
        return self._inner(bytes(letters))

    def _eos(self):
        if self._reduce == "sum":
            return self._weights[-1]
        eos = self._answers[b""]["eos"]
        return -np.inf if eos is None else eos

    def _leaf(self, position, prefix):
        """A token's own weight; for maxima, a byte token's as the server has it, so that
        no leaf exceeds the maximum its parents were given (the sampler's weights are the
        row renormalized in float32, which moves them by a few units in the last place,
        and top-k enumeration asserts that a child never outranks its parent)."""
        if self._reduce == "sum" or position in self._executor.control_positions:
            return self._weights[position]
        return self._answer(prefix)["end_of_token"]

    def _inner(self, prefix):
        executor = self._executor
        if not prefix:
            # sum: log Z, EOS included; max: the log max over every byte token and EOS.
            served = self._answers[b""]["log_mass"]
        else:
            parent = self._answer(prefix[:-1])
            relative = float(parent["logprobs"][prefix[-1]])
            served = parent["log_mass"] + relative if self._reduce == "sum" else relative
        spelled = [self._weights[i] for name, i in executor.spelled_control
                   if name.startswith(prefix)]
        if self._reduce == "sum":
            return np.exp(served) + sum(spelled)
        return max([served, *spelled])

    def _answer(self, prefix):
        answer = self._answers.get(prefix)
        if answer is None:
            self._executor.requests += 1
            answer = self._answers[prefix] = self._executor.lm.next_byte_logprobs_sync(
                self._token_ids, prefix, reduce=self._reduce)
        return answer
