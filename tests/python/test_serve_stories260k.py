"""CanopyLM against `canopy serve --model stories260K.bin`: log-probs equal the
independent oracle's (shared/oracle) within its tolerance, through the binary wire
format; tokenizer, vocabulary and greedy decoding agree too.

Needs CANOPY_SHARED_DIR (models/ and oracle/); without it the test skips, or fails
when CANOPY_REQUIRE_FIXTURES=1 (CI).
"""

import asyncio
import json
import os
import unittest

import numpy as np

from canopy_client import CanopyLM
from canopy_server import ServerTestCase

SHARED = os.environ.get("CANOPY_SHARED_DIR", "")
MODEL = os.path.join(SHARED, "models", "stories260K", "stories260K.bin")
ORACLE = os.path.join(SHARED, "oracle")


def require_fixtures():
    if SHARED and os.path.isfile(MODEL) and os.path.isdir(os.path.join(ORACLE, "stories260K")):
        return
    message = (f"stories260K fixtures not found (CANOPY_SHARED_DIR={SHARED!r} needs "
               "models/stories260K/stories260K.bin and oracle/stories260K)")
    if os.environ.get("CANOPY_REQUIRE_FIXTURES") == "1":
        raise AssertionError(message + " and CANOPY_REQUIRE_FIXTURES=1")
    raise unittest.SkipTest(message)


def load_json(*parts):
    with open(os.path.join(ORACLE, *parts)) as f:
        return json.load(f)


class Stories260KTest(ServerTestCase):
    @classmethod
    def setUpClass(cls):
        require_fixtures()
        cls.server_args = ("--model", MODEL)
        super().setUpClass()
        cls.cases = load_json("stories260K", "cases.json")

    def oracle_rows(self, case):
        path = os.path.join(ORACLE, "stories260K", case["file"])
        return np.fromfile(path, dtype="<f4").reshape(case["rows"], case["vocab"])

    def test_every_row_of_every_case_within_tolerance(self):
        self.assertEqual(self.lm.vocab_size, self.cases[0]["vocab"])
        for case in self.cases:
            with self.subTest(case["name"]):
                expected = self.oracle_rows(case)
                rows = asyncio.run(self.lm.prefix_logprobs(case["tokens"]))
                self.assertEqual(rows.shape, expected.shape)
                self.assertLessEqual(float(np.abs(rows - expected).max()), case["tolerance_abs"])
                last = self.lm.next_token_logprobs_sync(case["tokens"])
                self.assertLessEqual(float(np.abs(last - expected[-1]).max()), case["tolerance_abs"])

    def test_concurrent_next_token_rows_within_tolerance(self):
        async def every_prefix():
            queries = [(case, i) for case in self.cases for i in range(case["rows"])]
            rows = await asyncio.gather(*(self.lm.next_token_logprobs(case["tokens"][:i + 1])
                                          for case, i in queries))
            return queries, rows

        self.lm.clear_cache()
        queries, rows = asyncio.run(every_prefix())
        for (case, i), row in zip(queries, rows):
            error = float(np.abs(row - self.oracle_rows(case)[i]).max())
            self.assertLessEqual(error, case["tolerance_abs"], f"{case['name']} row {i}")

    def contract(self, row, prefix):
        """Issue 30's sum contract over a row, token by token in float64: (children,
        end_of_token, eos, Z) as masses."""
        p = np.exp(np.asarray(row, dtype=np.float64))
        eos = set(self.lm.model_info["eos_token_ids"])
        control = set(self.lm.special_tokens)
        child, exact = np.zeros(256), 0.0
        for t, token in enumerate(self.lm.byte_vocab):
            token = bytes(token)
            if t in eos or t in control or not token.startswith(prefix):
                continue
            if len(token) == len(prefix):
                exact += p[t]
            else:
                child[token[len(prefix)]] += p[t]
        eos_mass = sum(p[t] for t in eos) if not prefix else 0.0
        return child, exact, eos_mass, child.sum() + exact + eos_mass

    def test_next_byte_follows_the_contract_over_the_served_row(self):
        tokens = self.cases[0]["tokens"]
        row = np.asarray(self.lm.next_token_logprobs_sync(tokens))
        for prefix in (b"", b" ", b" t", b"\xff"):
            with self.subTest(prefix=prefix):
                got = asyncio.run(self.lm.next_byte_logprobs(tokens, prefix))
                blocking = self.lm.next_byte_logprobs_sync(tokens, prefix)
                np.testing.assert_array_equal(np.asarray(blocking["logprobs"]),
                                              np.asarray(got["logprobs"]))
                child, exact, eos_mass, z = self.contract(row, prefix)
                with np.errstate(divide="ignore"):
                    want = np.log(child) - np.log(z) if z > 0 else np.full(256, -np.inf)
                np.testing.assert_allclose(np.asarray(got["logprobs"]), want, rtol=1e-9)
                self.assertEqual(got["eos"] is None, bool(prefix))
                if z > 0:
                    self.assertAlmostEqual(got["log_mass"], float(np.log(z)), delta=1e-9)
                    total = np.exp(np.asarray(got["logprobs"])).sum() + np.exp(got["end_of_token"])
                    total += np.exp(got["eos"]) if got["eos"] is not None else 0.0
                    self.assertAlmostEqual(total, 1.0, delta=1e-9)
                else:
                    self.assertEqual(got["log_mass"], float("-inf"))

    def test_next_byte_batches_and_maxima_and_refusals(self):
        tokens = self.cases[0]["tokens"]
        row = np.asarray(self.lm.next_token_logprobs_sync(tokens), dtype=np.float64)
        answers = asyncio.run(self.lm.batch_next_byte_logprobs(
            [(tokens, b""), (tokens[:2], b" ")], reduce="max"))
        self.assertEqual(len(answers), 2)
        best_space = max(row[t] for t, token in enumerate(self.lm.byte_vocab)
                         if t not in self.lm.special_tokens and bytes(token).startswith(b" ")
                         and t not in self.lm.model_info["eos_token_ids"])
        self.assertEqual(float(np.asarray(answers[0]["logprobs"])[0x20]), best_space)
        with self.assertRaises(ValueError):
            asyncio.run(self.lm.next_byte_logprobs(tokens, b"", reduce="mean"))
        with self.assertRaises(TypeError):
            asyncio.run(self.lm.next_byte_logprobs(tokens, " "))

    def test_next_byte_calls_of_one_turn_share_a_request_and_batches_are_split(self):
        tokens = self.cases[0]["tokens"]
        questions = [(tokens[:n], prefix) for n in (1, 2, 3) for prefix in (b"", b" ")]

        def next_byte_requests():
            status, _, body = self.server.fetch("GET", "/metrics")
            return sum(float(line.rsplit(" ", 1)[1]) for line in body.decode().splitlines()
                       if line.startswith('canopy_http_requests_total{route="/v1/next_byte"'))

        async def one_turn(lm):
            return await asyncio.gather(*(lm.next_byte_logprobs(t, p) for t, p in questions))

        before = next_byte_requests()
        together = asyncio.run(one_turn(self.lm))
        self.assertEqual(next_byte_requests() - before, 1)
        with CanopyLM(self.server.url, array="numpy", timeout=60, max_batch=4) as small:
            before = next_byte_requests()
            split = asyncio.run(small.batch_next_byte_logprobs(questions))
            self.assertEqual(next_byte_requests() - before, 2)  # 4 + 2 questions
        with CanopyLM(self.server.url, array="numpy", timeout=60, coalesce=False) as alone:
            singles = [alone.next_byte_logprobs_sync(t, p) for t, p in questions]
        for a, b, c in zip(together, split, singles):
            np.testing.assert_array_equal(np.asarray(a["logprobs"]), c["logprobs"])
            np.testing.assert_array_equal(np.asarray(b["logprobs"]), c["logprobs"])
            self.assertEqual((a["log_mass"], b["log_mass"]), (c["log_mass"], c["log_mass"]))

    def test_tokenize_matches_the_oracle_ids(self):
        for case in self.cases:
            if "text" in case:
                self.assertEqual(self.lm.tokenize(case["text"]), case["tokens"], case["name"])

    def test_byte_vocab_matches_the_oracle_bytes(self):
        vocab = self.lm.byte_vocab
        self.assertEqual(len(vocab), self.lm.vocab_size)
        # Control tokens carry their names, as genlm-backend's byte_vocab has them.
        names = {0: b"<unk>", 1: b"<s>", 2: b"</s>"}
        for entry in load_json("tokenizers.json")["token_bytes"]["llama2c_tok512"]:
            expected = names[entry["id"]] if entry["hex"] is None else bytes.fromhex(entry["hex"])
            self.assertEqual(vocab[entry["id"]], expected, entry)
            self.assertEqual(vocab[entry["id"]].token_id, entry["id"])

    def test_the_tokenizer_surface_genlm_reads(self):
        # A fresh client, str_vocab first: it reads byte_vocab and the token strings,
        # which read byte_vocab too (a lock taken twice there once hung every caller).
        with CanopyLM(self.server.url, array="numpy", timeout=60) as lm:
            texts = lm.str_vocab
            tokenizer = lm.tokenizer
            vocab = lm.byte_vocab
            self.assertEqual(texts[2], "</s>")
            self.assertEqual(tokenizer.get_added_vocab(), {"<unk>": 0, "<s>": 1, "</s>": 2})
            self.assertEqual(tokenizer.all_special_ids, [0, 1, 2])
            self.assertEqual((tokenizer.bos_token, tokenizer.eos_token), ("<s>", "</s>"))
            self.assertEqual(tokenizer.bpe_ranks, {})  # llama2.c merges by score
            strings = tokenizer.convert_ids_to_tokens(list(range(len(vocab))))
            for i, (token, string) in enumerate(zip(vocab, strings)):
                spelled = bytes(tokenizer.byte_decoder[c] for c in string) if i > 2 else token
                self.assertEqual(spelled, bytes(token), i)
                self.assertEqual(tokenizer.convert_tokens_to_ids(string),
                                 min(j for j, t in enumerate(vocab) if bytes(t) == bytes(token)))
            text = "Once upon a time, there was a tiny cat."
            ids = tokenizer.encode(text)
            self.assertEqual(tokenizer.batch_decode([ids], skip_special_tokens=True), [text])

    def test_greedy_sample_from_bos(self):
        greedy = load_json("stories260K", "greedy.json")
        ids = asyncio.run(self.lm.sample(greedy["start_tokens"], len(greedy["ids"]), [], temperature=0))
        self.assertEqual(ids, greedy["ids"])
        # run.c's decode drops the leading space of the piece after BOS
        text = self.lm.detokenize(greedy["start_tokens"] + ids)
        self.assertEqual(text.decode("utf-8"), greedy["text"])
