"""Canopy's next-byte distributions against genlm's own tries, over the served model
(run_genlm_tests.sh runs this file for stories260K, gpt2-synthetic, and the mock model over
Qwen3's tokenizer, 152k tokens).

1. The contract (docs/http-api.md, POST /v1/next_byte), sum and max, against genlm-backend's
   ``TokenCharacterTrie`` in float64 over the row the server serves: an independent
   reference that keeps every token id, shared byte strings included.
2. ``canopy_client.genlm_bytes``: the masses it gives genlm-bytes' beam, node by node,
   against genlm-bytes' own reachability matrices applied in float64, in both trie modes;
   then genlm-bytes' ``ByteBeamState``, unchanged, over it and over its own trie: the same
   next-byte distributions, and no row fetched on the next-byte path.
3. ``canopy_client.genlm_control``: genlm-control's eager and top-k set samplers' trie
   masses against genlm-backend's float64 trie (sums) and genlm's own maxima, and the sets
   they draw (the likeliest item at every draw) against the same samplers unchanged.

Both references get the row with the weight of every control token other than EOS set to
zero: Canopy's contract spells no control token (genlm's tries spell its name).
"""

import asyncio
import math
import random
import urllib.request

import numpy as np
import pytest
import torch
from genlm.backend.trie import TokenCharacterTrie
from genlm.bytes import BeamParams, ByteBeamState
from genlm.bytes.trie import TrieMode

import canopy_genlm_plugin
from canopy_client.genlm_bytes import NextByteTrie, PendingRow, next_byte_beam
from canopy_client.genlm_control import shared_byte_strings, use_next_byte_masses

UNIT_ROUNDOFF_64 = 2.0 ** -53
UNIT_ROUNDOFF_32 = 2.0 ** -24


@pytest.fixture(scope="module")
def lm():
    return canopy_genlm_plugin.canopy_lm()


@pytest.fixture(scope="module")
def model(lm):
    """What the references need to know of the served model."""
    info = lm.model_info
    eos = list(info["eos_token_ids"])
    text_ids = lm.tokenizer.encode("Once upon a time, there was a little")
    bos = info["bos_token_id"]
    contexts = [[bos] if bos is not None else text_ids[:1],
                ([bos] if bos is not None else []) + text_ids[:6]]
    return {"eos": eos, "control": sorted(set(lm.special_tokens) - set(eos)),
            "contexts": contexts, "vocab_size": info["vocab_size"]}


def probabilities(lm, model, context):
    """float64 P(t) from the served float32 row, control tokens other than EOS at 0."""
    row = np.asarray(lm.next_token_logprobs_sync(context), dtype=np.float64)
    p = np.exp(row)
    p[model["control"]] = 0.0
    return p


def log(x):
    with np.errstate(divide="ignore"):
        return float(np.log(x))


def assert_log_close(actual, expected, tolerance, what):
    if expected == -math.inf:
        assert actual == -math.inf, f"{what}: {actual} where no token is"
    else:
        assert abs(actual - expected) <= tolerance, f"{what}: {actual} against {expected}"


# -- 1. the contract against genlm-backend's TokenCharacterTrie -------------------------

@pytest.fixture(scope="module")
def character_trie(lm):
    return TokenCharacterTrie(lm.byte_vocab)


def nodes_to_ask(trie, model, lm):
    """The root, 40 inner nodes drawn at random, every node under which two ids share a
    byte string, the path spelling EOS's name (its mass is not there), and bytes no
    token starts with."""
    inner = [n for n, children in enumerate(trie.children)
             if any(not isinstance(k, tuple) for k in children)]
    chosen = {trie.root, *random.Random(7).sample(inner, min(40, len(inner)))}
    chosen |= {n for n, children in enumerate(trie.children)
               if sum(isinstance(k, tuple) for k in children) > 1}
    prefixes = [bytes(trie.node2prefix[n]) for n in sorted(chosen)]
    eos_name = bytes(lm.byte_vocab[model["eos"][0]])
    prefixes += [eos_name[:2], eos_name, b"\xff\xfe\xfd"]
    return prefixes


def node_of(trie, prefix):
    node = trie.root
    for byte in prefix:
        node = trie.children[node].get(byte)
        if node is None:
            return None
    return node


def expected_answer(trie, sums, p, prefix, model, reduce):
    """The contract's answer for ``prefix`` from the trie's node values ``sums`` (sums or
    maxima of ``p``)."""
    combine = sum if reduce == "sum" else lambda xs: max(xs, default=0.0)
    node = node_of(trie, prefix)
    children = {} if node is None else trie.children[node]
    under = 0.0 if node is None else float(sums[node])
    eos = combine([float(p[e]) for e in model["eos"]]) if not prefix else None
    total = under if prefix else combine([under, eos])
    norm = log(total) if reduce == "sum" else 0.0

    def relative(value):  # null (-inf) for no token, under a node with no mass too
        return -math.inf if value == 0.0 else log(value) - norm

    logprobs = [-math.inf] * 256
    for key, child in children.items():
        if not isinstance(key, tuple):
            logprobs[key] = relative(float(sums[child]))
    ends = [float(sums[child]) for key, child in children.items() if isinstance(key, tuple)]
    end_of_token = relative(combine(ends)) if prefix else -math.inf
    return {"logprobs": logprobs, "end_of_token": end_of_token,
            "eos": None if eos is None else relative(eos), "log_mass": log(total)}


@pytest.mark.parametrize("reduce", ["sum", "max"])
def test_answers_match_genlm_backends_character_trie(lm, model, character_trie, reduce):
    trie = character_trie
    # float64 sums of at most V+2 positive terms on both sides, from the same float32
    # values: each log within (V+2) unit roundoffs, a difference of two logs twice that.
    tolerance = 4 * (model["vocab_size"] + 2) * UNIT_ROUNDOFF_64
    for context in model["contexts"]:
        p = probabilities(lm, model, context)
        spelled = p.copy()
        spelled[model["eos"]] = 0.0  # EOS is a control token too: its mass is "eos" only
        sums = trie.weight_sum(spelled) if reduce == "sum" else trie.weight_max(spelled)
        prefixes = nodes_to_ask(trie, model, lm)
        answers = asyncio.run(lm.batch_next_byte_logprobs(
            [(context, prefix) for prefix in prefixes], reduce=reduce))
        for prefix, answer in zip(prefixes, answers):
            expected = expected_answer(trie, sums, p, prefix, model, reduce)
            what = f"{reduce} after {context} at {prefix!r}"
            for byte in range(256):
                assert_log_close(float(answer["logprobs"][byte]), expected["logprobs"][byte],
                                 tolerance, f"{what}, byte {byte}")
            assert_log_close(answer["end_of_token"], expected["end_of_token"], tolerance,
                             f"{what}, end of token")
            assert_log_close(answer["log_mass"], expected["log_mass"], tolerance,
                             f"{what}, log mass")
            if expected["eos"] is None:
                assert answer["eos"] is None, what
            else:
                assert_log_close(answer["eos"], expected["eos"], tolerance, f"{what}, eos")


# -- 2. genlm-bytes over the next-byte path ---------------------------------------------

def byte_trie_or_refusal(lm, eos_tokens):
    """genlm-bytes' own trie refuses a vocabulary where two ids share a byte string
    (stories260K); NextByteTrie, built on it, refuses it alike."""
    try:
        return NextByteTrie(lm, eos_tokens=eos_tokens)
    except ValueError as refusal:
        assert "Duplicate word" in str(refusal)
        with pytest.raises(ValueError, match="Duplicate word"):
            asyncio.run(ByteBeamState.initial(lm, BeamParams(K=2, eos_tokens=eos_tokens)))
        pytest.skip(f"genlm-bytes refuses this vocabulary: {refusal}")


@pytest.fixture(scope="module")
def byte_tries(lm):
    """NextByteTrie by whether EOS is named, built once each: genlm-bytes' trie takes
    seconds over a 152k vocabulary, and the tests here only read it."""
    built = {}

    def trie(names_eos):
        if names_eos not in built:
            eos_names = [bytes(lm.byte_vocab[e]) for e in lm.model_info["eos_token_ids"]]
            built[names_eos] = byte_trie_or_refusal(lm, eos_names if names_eos else None)
        return built[names_eos]
    return trie


def reference_log_masses(byte_trie, p, mode):
    """genlm-bytes' node masses for ``p``, with its own reachability matrix, in float64."""
    matrix = byte_trie.M_with_eos if mode is TrieMode.WITH_EOS else byte_trie.M_no_eos
    coo = matrix.to_sparse_coo().coalesce()
    dense_p = torch.tensor(p, dtype=torch.float64)
    sums = torch.zeros(coo.shape[1], dtype=torch.float64)
    rows, cols = coo.indices()
    sums.index_add_(0, cols, dense_p[rows])
    with np.errstate(divide="ignore"):
        return np.log(sums.numpy())


def nodes_a_beam_reads(byte_trie, eos_ids):
    """The root, its children, the EOS node, 200 nodes drawn at random (leaves
    included), and every node on the path spelling each EOS token."""
    trie = byte_trie
    nodes = {trie.root, trie.eos_node, *trie.children[trie.root].values()}
    nodes |= set(random.Random(11).sample(range(len(trie.children)), 200))
    for token_id in eos_ids:
        node = trie.root
        for byte in trie.decode[token_id]:
            node = trie.children[node][byte]
            nodes.add(node)
        nodes.add(trie.children[node][trie.eot_token])
    return sorted(nodes)


@pytest.mark.parametrize("names_eos", [True, False])
@pytest.mark.parametrize("mode", [TrieMode.WITH_EOS, TrieMode.WITHOUT_EOS])
def test_the_beams_masses_are_genlm_bytes_own(lm, model, byte_tries, mode, names_eos):
    trie = byte_tries(names_eos)
    tolerance = 2 * (model["vocab_size"] + 2) * UNIT_ROUNDOFF_64
    for context in model["contexts"]:
        p = probabilities(lm, model, context)
        if len(model["eos"]) > 1 and not (names_eos and mode is TrieMode.WITH_EOS):
            p[model["eos"]] = 0.0  # several EOS tokens' mass is at the root only
        expected = reference_log_masses(trie.trie, p, mode)
        masses = torch.log(asyncio.run(trie.weight_sum(PendingRow(context), mode))).cpu().numpy()
        for node in nodes_a_beam_reads(trie.trie, model["eos"]):
            if node == trie.trie.root and len(model["eos"]) > 1:
                continue  # the root's total holds them (checked in test 1)
            assert_log_close(masses[node], float(expected[node]), tolerance,
                             f"node {node} ({trie.trie.node2prefix[node]}) after "
                             f"{context}, {mode}, EOS named: {names_eos}")


def logprobs_requests(lm):
    """POST /v1/logprobs requests the server has answered (its /metrics)."""
    with urllib.request.urlopen(canopy_genlm_plugin._server.url + "/metrics") as response:
        text = response.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith('canopy_http_requests_total{route="/v1/logprobs"'))


async def beam_run(beam, text, steps):
    """Prefill ``text``, then ``steps`` times: the next-byte distribution, then the
    likeliest byte. Returns the distributions and the bytes taken."""
    beam = await beam.prefill(text)
    seen, taken = [], []
    for _ in range(steps):
        logp = np.asarray((await beam.logp_next()).ps, dtype=np.float64)
        seen.append(logp)
        byte = int(np.argmax(logp[:256]))
        taken.append(byte)
        beam = await (beam.prune() << byte)
    await beam.cleanup()
    return seen, taken


def test_genlm_bytes_beam_is_the_same_over_the_next_byte_path(lm, model, byte_tries):
    byte_tries(names_eos=True)
    eos_names = [bytes(lm.byte_vocab[e]) for e in model["eos"]]
    if model["control"] or len(model["eos"]) > 1:
        pytest.skip("control tokens other than one EOS carry mass in genlm-bytes' own "
                    "trie (spelled by their names), none over Canopy's contract")
    # Candidates pruned by probability (below 1e-3 of the beam's), not by a width, where
    # a near tie between two of them would decide which stays.
    params = BeamParams(K=10_000, prune_threshold=1e-3, eos_tokens=eos_names)
    text, steps = b"Once upon a time", 4

    async def run(initial):
        return await beam_run(await initial, text, steps)

    before = logprobs_requests(lm)
    ours, taken = asyncio.run(run(next_byte_beam(lm, params)))
    assert logprobs_requests(lm) == before, "the next-byte path fetched a row"
    theirs, their_taken = asyncio.run(run(ByteBeamState.initial(lm, params)))

    # genlm-bytes sums in float32: a node's mass within V unit roundoffs (relative), and
    # a distribution here is made of at most 2 such logs per byte consumed, plus two.
    tolerance = 2 * (len(text) + steps + 2) * model["vocab_size"] * UNIT_ROUNDOFF_32
    assert taken == their_taken
    for step, (mine, reference) in enumerate(zip(ours, theirs)):
        for index in range(258):
            assert_log_close(mine[index], reference[index], tolerance,
                             f"step {step}, index {index}")


# -- 3. genlm-control's set samplers over the next-byte path ----------------------------

def prompted(lm):
    from genlm.control import PromptedLLM

    llm = PromptedLLM(lm)
    llm.set_prompt_from_str("Once upon a time")
    return llm


def sampler_pair(lm, kind):
    """genlm-control's own sampler and the same over next-byte masses."""
    from genlm.control import BoolFSA, eager_token_sampler, topk_token_sampler

    def make():
        bytes_potential = BoolFSA.from_regex(r"[ -~]*")
        llm = prompted(lm)
        if kind == "eager":
            return eager_token_sampler(llm, bytes_potential)
        return topk_token_sampler(llm, bytes_potential, K=5)

    own, ours = make(), make()
    try:
        use_next_byte_masses(ours)
    except ValueError as refusal:
        assert kind == "topk" and "share byte strings" in str(refusal)
        pytest.skip(f"refused: {refusal}")
    return own, ours


@pytest.fixture(scope="module")
def sampler_pairs(lm):
    """sampler_pair by kind, built once each: a sampler builds genlm-backend's trie over
    the vocabulary, some 20 s over 152k ids, and the samplers keep no state between
    draws that the tests here read."""
    built = {}

    def pair(kind):
        if kind not in built:
            built[kind] = sampler_pair(lm, kind)
        return built[kind]
    return pair


def contexts_for(lm, llm):
    ids = lm.tokenizer.encode(" there was", add_special_tokens=False)
    return [[], [llm.token_maps.decode[i] for i in ids]]


def float32_tolerance(model):
    """PromptedLLM renormalizes the row in float32 (a sum of V terms) before the samplers
    see it; genlm's own product sums in float32 too: V unit roundoffs, relative, each."""
    return 4 * (model["vocab_size"] + 2) * UNIT_ROUNDOFF_32


@pytest.mark.parametrize("reduce", ["sum", "max"])
def test_set_sampler_masses_are_genlm_controls_own(lm, model, sampler_pairs, reduce):
    _, ours = sampler_pairs("eager")
    set_sampler = ours.set_sampler
    if reduce == "max" and shared_byte_strings(set_sampler.iter_potential, lm):
        pytest.skip("maxima serve top-k alone, which refuses a vocabulary where ids share "
                    "byte strings (test_set_samplers_draw_the_same_sets... checks that)")
    trie = set_sampler.trie
    tolerance = float32_tolerance(model)
    if reduce == "sum":
        # genlm-backend's float64 trie over the same items: the same nodes (its construction).
        reference = TokenCharacterTrie(trie.decode)
        assert reference.children == trie.children
    inner = [n for n, children in enumerate(trie.children)
             if any(not isinstance(k, tuple) for k in children)]
    nodes = sorted({trie.root, *trie.children[trie.root].values(),
                    *random.Random(3).sample(inner, min(60, len(inner))),
                    *random.Random(4).sample(range(len(trie.children)), 60)})

    async def masses(context):
        logws = await set_sampler.iter_potential.logw_next(context)
        if reduce == "sum":
            ws = logws.exp().weights
            served = await set_sampler.trie_executor.weight_sum(ws)
            return served, reference.weight_sum(np.asarray(ws, np.float64))
        ws = logws.weights
        served = await set_sampler.trie_executor.weight_max(ws)
        return served, trie.weight_max(ws)  # genlm's parallel max: exact in float32

    for context in contexts_for(lm, set_sampler.iter_potential):
        served, expected = asyncio.run(masses(context))
        for node in nodes:
            got, want = float(served[node]), float(expected[node])
            what = f"{reduce} at node {node} ({trie.node2prefix[node]}) after {context}"
            if reduce == "sum":
                assert_log_close(log(got), log(want), tolerance, what)
            else:
                assert_log_close(got, want, tolerance * max(1.0, abs(want)), what)


@pytest.mark.parametrize("kind", ["eager", "topk"])
def test_set_samplers_draw_the_same_sets_over_the_next_byte_path(lm, model, sampler_pairs,
                                                                 kind):
    own, ours = sampler_pairs(kind)
    requests_before = ours.set_sampler.trie_executor.requests
    tolerance = float32_tolerance(model)

    def likeliest(ps):
        return max(ps.keys(), key=lambda key: ps[key])

    async def both(context):
        return (await own.set_sampler.sample_set(context, draw=likeliest),
                await ours.set_sampler.sample_set(context, draw=likeliest))

    for context in contexts_for(lm, ours.set_sampler.iter_potential):
        (want, want_logp), (got, got_logp) = asyncio.run(both(context))
        assert_log_close(got_logp, want_logp, tolerance, f"log-prob of the set after {context}")
        for index, (g, w) in enumerate(zip(got.weights, want.weights)):
            assert_log_close(float(g), float(w), tolerance * max(1.0, abs(float(w))),
                             f"{kind}: weight {index} after {context}")
    assert ours.set_sampler.trie_executor.requests > requests_before
