"""CanopyLM against `canopy serve --backend mock`: answers, concurrency, sampling,
errors and the sync bridge, end to end."""

import asyncio
import concurrent.futures
import json
import random
import time
import unittest

import numpy as np

from canopy_client import CanopyError, CanopyLM, CanopyRequestError
from canopy_server import ServerTestCase


def random_sequences(count, vocab, seed, max_len=24):
    rng = random.Random(seed)
    return [[rng.randrange(vocab) for _ in range(rng.randint(1, max_len))] for _ in range(count)]


def json_rows(values):
    """JSON log-prob values as float32 (null stands for -inf or NaN, which JSON lacks)."""
    return np.array([[-np.inf if v is None else v for v in row] for row in values], dtype=np.float32)


class MockServerTest(ServerTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.vocab = cls.lm.vocab_size

    def fetch_json_rows(self, body):
        status, _, raw = self.server.fetch("POST", "/v1/logprobs", body)
        self.assertEqual(status, 200, raw)
        return json.loads(raw)

    # -- answers -----------------------------------------------------------------------

    def test_model_info(self):
        info = self.lm.model_info
        for key in ("name", "architecture", "vocab_size", "context_length", "dtype", "devices", "tokenizer"):
            self.assertIn(key, info)
        self.assertGreater(self.vocab, 1)

    def test_binary_answer_equals_json_answer(self):
        for tokens in ([0], [1, 2, 3], random_sequences(1, self.vocab, seed=1)[0]):
            answer = self.fetch_json_rows({"tokens": tokens})
            self.assertEqual(answer["tokens"], tokens)
            row = self.lm.next_token_logprobs_sync(tokens)
            self.assertEqual((row.shape, row.dtype), ((self.vocab,), np.float32))
            np.testing.assert_array_equal(row, json_rows([answer["logprobs"]])[0])

    def test_binary_batch_and_all_positions_equal_json(self):
        sequences = random_sequences(5, self.vocab, seed=2)
        answer = self.fetch_json_rows({"batch": sequences})
        np.testing.assert_array_equal(self.lm.batch_next_token_logprobs_sync(sequences),
                                      json_rows([r["logprobs"] for r in answer["results"]]))
        answer = self.fetch_json_rows({"tokens": sequences[0], "all_positions": True})
        got = asyncio.run(self.lm.prefix_logprobs(sequences[0]))
        np.testing.assert_array_equal(got, json_rows(answer["logprobs"]))

    def test_rows_are_normalised_log_probabilities(self):
        row = self.lm.next_token_logprobs_sync([5, 6])
        self.assertTrue(np.all(row <= 0))
        self.assertAlmostEqual(float(np.logaddexp.reduce(row.astype(np.float64))), 0.0, places=4)

    def test_float16_wire(self):
        with CanopyLM(self.server.url, array="numpy", dtype="float16") as half:
            tokens = [3, 1, 4, 1, 5]
            got, exact = half.next_token_logprobs_sync(tokens), self.lm.next_token_logprobs_sync(tokens)
        self.assertEqual(got.dtype, np.float32)
        np.testing.assert_allclose(got, exact, rtol=1e-3)
        self.assertFalse(np.array_equal(got, exact), "float16 was asked for but not sent")

    def test_batch_shapes(self):
        sequences = random_sequences(7, self.vocab, seed=3)
        singles = np.stack([self.lm.next_token_logprobs_sync(s) for s in sequences])
        rows = asyncio.run(self.lm.batch_next_token_logprobs(sequences))
        self.assertEqual(rows.shape, (7, self.vocab))
        np.testing.assert_array_equal(rows, singles)
        with CanopyLM(self.server.url, array="numpy", max_batch=3) as chunked:
            np.testing.assert_array_equal(chunked.batch_next_token_logprobs_sync(sequences), singles)

    def test_prefix_logprobs_has_a_row_per_prefix(self):
        tokens = [9, 8, 7, 6]
        rows = asyncio.run(self.lm.prefix_logprobs(tokens))
        self.assertEqual(rows.shape, (4, self.vocab))
        for i in range(4):
            np.testing.assert_array_equal(rows[i], self.lm.next_token_logprobs_sync(tokens[:i + 1]))

    def test_token_ids_may_be_numpy(self):
        tokens = np.array([4, 2], dtype=np.int64)
        np.testing.assert_array_equal(self.lm.next_token_logprobs_sync(tokens),
                                      self.lm.next_token_logprobs_sync([4, 2]))

    # -- many callers ------------------------------------------------------------------

    def test_hundreds_of_concurrent_queries_equal_their_sequential_answers(self):
        sequences = random_sequences(300, self.vocab, seed=4)
        sequences += sequences[:50]  # exact duplicates in flight together
        sequences += [s[:-1] for s in sequences[:50] if len(s) > 1]  # prefixes of others

        async def all_at_once(lm):
            return await asyncio.gather(*(lm.next_token_logprobs(s) for s in sequences))

        self.lm.clear_cache()
        with CanopyLM(self.server.url, array="numpy", max_connections=16) as lm:
            concurrent_rows = asyncio.run(all_at_once(lm))
            self.assertLessEqual(lm._pool.opened, 16)
        self.lm.clear_cache()
        for tokens, row in zip(sequences, concurrent_rows):
            np.testing.assert_array_equal(row, self.lm.next_token_logprobs_sync(tokens), err_msg=str(tokens))

    def test_sync_calls_from_many_threads(self):
        sequences = random_sequences(64, self.vocab, seed=5)
        expected = self.lm.batch_next_token_logprobs_sync(sequences)
        with concurrent.futures.ThreadPoolExecutor(8) as threads:
            rows = list(threads.map(self.lm.next_token_logprobs_sync, sequences))
        np.testing.assert_array_equal(np.stack(rows), expected)

    # -- the sync bridge ---------------------------------------------------------------

    def test_sync_methods_inside_a_running_event_loop(self):
        expected = self.lm.next_token_logprobs_sync([1, 2])

        async def caller():
            asyncio.get_running_loop()  # this is the situation: a loop runs in this thread
            row = self.lm.next_token_logprobs_sync([1, 2])
            rows = self.lm.batch_next_token_logprobs_sync([[1, 2], [1, 2]])
            return row, rows, await self.lm.next_token_logprobs([1, 2])

        row, rows, awaited = asyncio.run(caller())
        np.testing.assert_array_equal(row, expected)
        np.testing.assert_array_equal(rows, np.stack([expected, expected]))
        np.testing.assert_array_equal(awaited, expected)

    def test_one_client_across_many_event_loops(self):
        expected = self.lm.next_token_logprobs_sync([3])
        for _ in range(3):  # each asyncio.run makes and closes its own loop
            np.testing.assert_array_equal(asyncio.run(self.lm.next_token_logprobs([3])), expected)

    def test_closed_client_refuses_calls(self):
        async def use_and_close():
            async with CanopyLM(self.server.url, array="numpy") as lm:
                await lm.next_token_logprobs([1])
            return lm

        lm = asyncio.run(use_and_close())
        with self.assertRaisesRegex(RuntimeError, "closed"):
            lm.next_token_logprobs_sync([1])
        lm.close()  # twice is fine

    # -- sampling ----------------------------------------------------------------------

    def greedy_by_stepping(self, prompt, steps):
        tokens = list(prompt)
        for _ in range(steps):
            tokens.append(int(np.argmax(self.lm.next_token_logprobs_sync(tokens))))
        return tokens[len(prompt):]

    def test_seeded_sample_is_reproducible(self):
        async def draws():
            return [await self.lm.sample([1, 2], 20, [], temperature=1.0, seed=seed) for seed in (7, 7, 8, 9, 10)]

        first, again, *others = asyncio.run(draws())
        self.assertEqual(len(first), 20)
        self.assertTrue(all(0 <= t < self.vocab for t in first))
        self.assertEqual(first, again)
        self.assertTrue(any(other != first for other in others), "different seeds all drew the same ids")

    def test_greedy_sample_equals_argmax_stepping(self):
        got = asyncio.run(self.lm.sample([5], 12, [], temperature=0.0))
        self.assertEqual(got, self.greedy_by_stepping([5], 12))

    def test_eos_ends_the_sample_and_is_left_out(self):
        path = self.greedy_by_stepping([6], 12)
        stop = next(k for k in range(1, len(path)) if path[k] not in path[:k])
        got = asyncio.run(self.lm.sample([6], 12, [path[stop]], temperature=0.0))
        self.assertEqual(got, path[:stop])

    def test_zero_max_tokens(self):
        self.assertEqual(asyncio.run(self.lm.sample([1, 2], 0, [], seed=1)), [])

    def test_batch_sample(self):
        prompts = [[1], [2, 3], [1]]
        first = asyncio.run(self.lm.batch_sample(prompts, 10, [], temperature=1.0, seed=3))
        again = asyncio.run(self.lm.batch_sample(prompts, 10, [], temperature=1.0, seed=3))
        self.assertEqual([len(ids) for ids in first], [10, 10, 10])
        self.assertEqual(first, again)
        greedy = asyncio.run(self.lm.batch_sample(prompts, 6, [], temperature=0.0))
        self.assertEqual(greedy, [self.greedy_by_stepping(p, 6) for p in prompts])

    def test_batch_sample_beyond_the_servers_batch_limit(self):
        # 1,030 prompts pass the server's limit (1,024): the client splits them.
        prompts = [[1 + i % 7] for i in range(1030)]
        first = asyncio.run(self.lm.batch_sample(prompts, 2, [], temperature=1.0, seed=5))
        self.assertEqual(len(first), 1030)
        self.assertTrue(all(len(ids) == 2 for ids in first))
        self.assertEqual(asyncio.run(self.lm.batch_sample(prompts, 2, [], temperature=1.0, seed=5)),
                         first)
        greedy = asyncio.run(self.lm.batch_sample(prompts, 3, [], temperature=0.0))
        self.assertEqual(greedy[1029], self.greedy_by_stepping(prompts[1029], 3))

    def test_a_split_batch_keeps_one_stream_per_prompt(self):
        prompts = [[2]] * 10
        with CanopyLM(self.server.url, array="numpy", max_batch=4) as small:
            split = asyncio.run(small.batch_sample(prompts, 8, [], temperature=1.0, seed=9))
        whole = asyncio.run(self.lm.batch_sample(prompts, 8, [], temperature=1.0, seed=9))
        self.assertEqual(split[:4], whole[:4])  # the first request keeps the seed
        self.assertEqual(len({tuple(ids) for ids in split}), 10)  # equal prompts, own draws

    # -- errors --------------------------------------------------------------------------

    def test_bad_input_raises_value_error_as_genlm_backend(self):
        for bad in ([], [self.vocab], [-1]):
            with self.assertRaises(ValueError):
                self.lm.next_token_logprobs_sync(bad)
            with self.assertRaises(CanopyRequestError):
                asyncio.run(self.lm.next_token_logprobs(bad))

    def assert_canopy_error(self, status, code, call, *args):
        with self.assertRaises(CanopyError) as caught:
            call(*args)
        self.assertEqual((caught.exception.status, caught.exception.code), (status, code),
                         caught.exception.message)
        return caught.exception

    def test_errors_carry_the_server_code_and_the_client_keeps_working(self):
        expected = self.lm.next_token_logprobs_sync([1, 2])
        error = self.assert_canopy_error(400, "token_out_of_range", self.lm.next_token_logprobs_sync,
                                         [1, self.vocab])
        self.assertIn(str(self.vocab), error.message)
        self.assert_canopy_error(400, "token_out_of_range", self.lm.next_token_logprobs_sync, [-1])
        self.assert_canopy_error(400, "empty_sequence", self.lm.next_token_logprobs_sync, [])
        self.assert_canopy_error(400, "token_out_of_range", self.lm.batch_next_token_logprobs_sync,
                                 [[1], [self.vocab + 5]])
        too_long = [1] * (self.lm.model_info["context_length"] + 1)
        self.assert_canopy_error(400, "sequence_too_long", self.lm.next_token_logprobs_sync, too_long)
        np.testing.assert_array_equal(self.lm.next_token_logprobs_sync([1, 2]), expected)

    def test_empty_batches_are_refused(self):
        self.assert_canopy_error(400, "invalid_request", self.lm.batch_next_token_logprobs_sync, [])
        with self.assertRaises(CanopyError) as caught:
            asyncio.run(self.lm.batch_sample([], 3, []))
        self.assertEqual(caught.exception.code, "invalid_request")

    def test_no_tokenizer(self):
        self.assertFalse(self.lm.model_info["tokenizer"])
        self.assert_canopy_error(400, "no_tokenizer", self.lm.tokenize, "hello")
        self.assert_canopy_error(400, "no_tokenizer", lambda: self.lm.byte_vocab)

    def test_async_errors_beside_good_queries(self):
        async def mixed():
            return await asyncio.gather(self.lm.next_token_logprobs([1, 2]),
                                        self.lm.next_token_logprobs([]),
                                        self.lm.next_token_logprobs([2, self.vocab]),
                                        self.lm.sample([1], 3, [], seed=1),
                                        return_exceptions=True)

        good, empty, out_of_range, sampled = asyncio.run(mixed())
        np.testing.assert_array_equal(good, self.lm.next_token_logprobs_sync([1, 2]))
        self.assertEqual((empty.status, empty.code), (400, "empty_sequence"))
        self.assertEqual((out_of_range.status, out_of_range.code), (400, "token_out_of_range"))
        self.assertEqual(len(sampled), 3)

    # -- caches --------------------------------------------------------------------------

    def test_cache_calls_leave_answers_unchanged(self):
        tokens = [11, 12, 13, 14]
        expected = self.lm.next_token_logprobs_sync(tokens)
        self.lm.cache_kv(tokens[:3])
        np.testing.assert_array_equal(self.lm.next_token_logprobs_sync(tokens), expected)
        self.lm.clear_kv_cache()
        np.testing.assert_array_equal(self.lm.next_token_logprobs_sync(tokens), expected)
        self.lm.clear_cache()
        np.testing.assert_array_equal(self.lm.next_token_logprobs_sync(tokens), expected)
        self.assert_canopy_error(400, "token_out_of_range", self.lm.cache_kv, [self.vocab])


class IdleConnectionTest(ServerTestCase):
    """The server closes keep-alive connections idle for 200 ms: the pooled connection
    is gone when the next request comes, and the client must not fail because of it."""

    server_args = ("--backend", "mock", "--idle-timeout-ms", "200")

    def test_requests_after_the_server_closed_idle_connections(self):
        expected = self.lm.next_token_logprobs_sync([1, 2])
        for _ in range(2):
            time.sleep(0.5)
            np.testing.assert_array_equal(self.lm.next_token_logprobs_sync([1, 2]), expected)
        self.assertEqual(self.lm._pool.opened, 3)


class ArrayKindTest(ServerTestCase):
    def test_torch_when_importable(self):
        try:
            import torch
        except ImportError:
            with self.assertRaisesRegex(ImportError, "array='torch' needs PyTorch"):
                CanopyLM(self.server.url, array="torch")
            with CanopyLM(self.server.url, array="auto") as lm:
                self.assertIsInstance(lm.next_token_logprobs_sync([1]), np.ndarray)
            return
        with CanopyLM(self.server.url, array="auto") as lm:
            row = lm.next_token_logprobs_sync([1])
            rows = lm.batch_next_token_logprobs_sync([[1], [2]])
        self.assertIsInstance(row, torch.Tensor)
        self.assertEqual((row.dtype, tuple(rows.shape)), (torch.float32, (2, self.lm.vocab_size)))


if __name__ == "__main__":
    unittest.main()
