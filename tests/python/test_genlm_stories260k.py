"""CanopyLM as genlm code uses an AsyncLM, over stories260K: started with
``CanopyLM.from_name`` (its own `canopy serve`, stopped on close), the tokenizer
attributes genlm-control's PromptedLLM reads, and a small sequential Monte Carlo written
in genlm-control's style (an LM potential times a boolean constraint, token-level
proposals, resampling) whose particles all satisfy the constraint.

Needs CANOPY_SHARED_DIR; skips without it, or fails when CANOPY_REQUIRE_FIXTURES=1.
"""

import asyncio
import math
import unittest

import numpy as np

from canopy_client import CanopyLM
from canopy_server import canopy_cli
from test_serve_stories260k import MODEL, load_json, require_fixtures


class GenlmInterfaceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_fixtures()
        cls.lm = CanopyLM.from_name(MODEL, canopy=canopy_cli(), array="numpy", timeout=60)
        cls.addClassCleanup(cls.lm.close)

    def test_the_tokenizer_reads_as_prompted_llm_expects(self):
        tok = self.lm.tokenizer
        self.assertEqual(tok.eos_token_id, 2)
        self.assertEqual(tok.bos_token_id, 1)
        # PromptedLLM's default EOS: the bytes of the tokenizer's EOS token.
        self.assertEqual(self.lm.byte_vocab[tok.eos_token_id], b"</s>")
        self.assertEqual(tok.eos_token, "</s>")
        self.assertEqual(len(tok), 512)
        for case in load_json("stories260K", "cases.json"):
            if "text" not in case:
                continue
            self.assertEqual(tok.encode(case["text"]), case["tokens"])
            self.assertEqual(tok.encode(case["text"], add_special_tokens=False), case["tokens"][1:])
            # llama2.c's decode (run.c): BOS writes nothing and takes the space after it.
            self.assertEqual(tok.decode(case["tokens"]), case["text"])
        self.assertEqual(self.lm.str_vocab[403], self.lm.byte_vocab[403].decode())

    def test_close_stops_the_server_it_started(self):
        lm = CanopyLM.from_name(MODEL, canopy=canopy_cli(), array="numpy")
        self.assertEqual(len(lm.next_token_logprobs_sync([1, 403])), 512)
        lm.close()
        self.assertEqual(lm._server.stop(), 0, "SIGTERM on close; canopy serve exits 0")

    def test_uncached_and_reset_are_there_and_agree(self):
        tokens = [1, 403, 407, 261]
        self.lm.reset_async_queries()
        np.testing.assert_allclose(self.lm.next_token_logprobs_uncached(tokens),
                                   self.lm.next_token_logprobs_sync(tokens), atol=1e-5)

    def test_a_small_smc_in_genlm_control_style(self):
        first = asyncio.run(constrained_smc(self.lm, seed=3))
        again = asyncio.run(constrained_smc(self.lm, seed=3))
        self.assertEqual(first, again, "the same seed, the same particles")
        forbidden = forbidden_tokens(self.lm)
        for tokens, log_weight in first:
            self.assertTrue(math.isfinite(log_weight))
            self.assertFalse(set(tokens) & forbidden, "every particle satisfies the constraint")
            self.assertTrue(len(tokens) == STEPS or tokens[-1] == 2)


PARTICLES = 16
STEPS = 24
PROMPT = "Once upon a time"


def forbidden_tokens(lm):
    """The constraint: no token whose text holds the letter 'e' (a lipogram)."""
    return {i for i, token in enumerate(lm.byte_vocab) if b"e" in token and i != 2}


async def constrained_smc(lm, seed):
    """SMC over the product of the LM and a boolean potential, as genlm-control's
    PromptedLLM * BoolFSA with a direct token sampler: each particle extends by a token
    drawn from the LM restricted to allowed tokens, its weight gains the log-mass of the
    allowed tokens, and the particles are resampled (multinomially) when the effective
    sample size falls under half."""
    rng = np.random.default_rng(seed)
    prompt = lm.tokenizer.encode(PROMPT)
    eos = lm.tokenizer.eos_token_id
    allowed = np.ones(len(lm.byte_vocab), dtype=bool)
    allowed[list(forbidden_tokens(lm))] = False
    particles = [[] for _ in range(PARTICLES)]
    log_weights = np.zeros(PARTICLES)
    for _ in range(STEPS):
        live = [i for i, p in enumerate(particles) if not (p and p[-1] == eos)]
        if not live:
            break
        rows = await lm.batch_next_token_logprobs([prompt + particles[i] for i in live])
        for row, i in zip(np.asarray(rows), live):
            masked = np.where(allowed, row, -np.inf)
            log_mass = np.logaddexp.reduce(masked)
            probs = np.exp(masked - log_mass)
            particles[i] = particles[i] + [int(rng.choice(len(probs), p=probs / probs.sum()))]
            log_weights[i] += log_mass
        normalized = np.exp(log_weights - np.logaddexp.reduce(log_weights))
        if 1.0 / np.sum(normalized ** 2) < PARTICLES / 2:
            picks = rng.choice(PARTICLES, size=PARTICLES, p=normalized)
            particles = [list(particles[j]) for j in picks]
            log_weights = np.full(PARTICLES, np.logaddexp.reduce(log_weights) - math.log(PARTICLES))
    return [(p, float(w)) for p, w in zip(particles, log_weights)]


if __name__ == "__main__":
    unittest.main()
