"""genlm-backend's vocabulary and trie modules over CanopyLM, run by run_genlm_tests.sh
beside genlm's own tests (the model is whatever canopy_genlm_plugin.py serves).

genlm-backend's own trie tests build their model with transformers (MockAsyncLM over
GPT-2's hub tokenizer), so these take their place for CanopyLM: the trie classes accept
its vocabulary (ids that spell the same bytes included) and their masses are its
probabilities; ``decode_vocab`` and ``get_byte_vocab`` read its tokenizer back into
exactly its ``byte_vocab`` and ``str_vocab``.
"""

import asyncio

import numpy as np
import pytest
import torch

from genlm.backend.llm import AsyncLM, load_model_by_name
from genlm.backend.tokenization import Token, decode_vocab
from genlm.backend.tokenization.bytes import get_byte_vocab
from genlm.backend.trie import (AsyncTokenCharacterTrie, ParallelTokenCharacterTrie,
                                TokenCharacterTrie)


@pytest.fixture(scope="module")
def lm():
    return load_model_by_name("the served model")


@pytest.fixture(scope="module")
def probabilities(lm):
    return torch.exp(lm.next_token_logprobs_sync(lm.tokenizer.encode("Once upon a time")))


def test_canopy_lm_is_an_async_lm_with_genlms_tokens(lm):
    assert isinstance(lm, AsyncLM)
    assert all(type(t) is Token and t.token_id == i for i, t in enumerate(lm.byte_vocab))


def test_decode_vocab_reads_the_tokenizer_back_into_the_vocabulary(lm):
    byte_vocab, str_vocab = decode_vocab(lm.tokenizer)
    assert [(t.token_id, bytes(t)) for t in byte_vocab] == \
        [(t.token_id, bytes(t)) for t in lm.byte_vocab]
    assert str_vocab == lm.str_vocab
    assert get_byte_vocab(lm.tokenizer) == [bytes(t) for t in lm.byte_vocab]


@pytest.mark.parametrize("trie_class", [TokenCharacterTrie, ParallelTokenCharacterTrie])
def test_trie_masses_are_the_models_probabilities(lm, probabilities, trie_class):
    vocab = lm.byte_vocab
    trie = trie_class(decode=vocab)
    masses = np.asarray(trie.weight_sum(probabilities), dtype=np.float64)
    p = probabilities.double().numpy()
    # Each id has a leaf of its own holding its probability, ids that share bytes too.
    leaves = dict(trie.idx_to_leaf)
    assert len(set(leaves.values())) == len(vocab)
    np.testing.assert_allclose(masses[[leaves[i] for i in range(len(vocab))]], p, rtol=1e-6)
    # A node holds the mass of every token under it: the root all, a first byte its tokens.
    # The parallel trie sums in float32: n positive terms summed in any order are off by
    # at most (n - 1) * 2^-24 of their total (the total here is at most 1).
    bound = len(vocab) * 2.0**-24
    assert masses[trie.root] == pytest.approx(p.sum(), abs=bound)
    for first in sorted({bytes(t)[:1] for t in vocab if len(t)})[:8]:
        node = trie.children[trie.root][first[0]]
        expected = sum(p[t.token_id] for t in vocab if bytes(t)[:1] == first)
        assert masses[node] == pytest.approx(expected, abs=bound), first


def test_the_async_trie_answers_as_the_trie(lm, probabilities):
    async def both():
        trie = AsyncTokenCharacterTrie.from_vocab(lm.byte_vocab, backend="parallel")
        try:
            return await asyncio.gather(trie.weight_sum(probabilities),
                                        trie.weight_max(probabilities))
        finally:
            await trie.cleanup()

    masses, maxima = asyncio.run(both())
    trie = ParallelTokenCharacterTrie(decode=lm.byte_vocab)
    np.testing.assert_allclose(np.asarray(masses), np.asarray(trie.weight_sum(probabilities)),
                               rtol=1e-6)
    np.testing.assert_allclose(np.asarray(maxima), np.asarray(trie.weight_max(probabilities)),
                               rtol=1e-6)
