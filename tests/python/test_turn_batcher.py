"""``next_token_logprobs`` calls of one event-loop turn share one batch request
(canopy_client/turn_batcher.py), and each still gets exactly its own answer: a refused
batch is asked again query by query, other failures reach every query, a cancelled
query leaves the others answered. Against a scripted server that records requests."""

import asyncio
import json
import unittest

import numpy as np

from binary_answers import pack_answer
from canopy_client import CanopyError, CanopyLM, CanopyRequestError
from stub_server import StubServer, reply

BINARY = "Content-Type: application/octet-stream"
BAD_TOKEN = 99


def row_of(sequence):
    """The stub's row for a sequence: distinct per sequence, so a mix-up shows."""
    return [-float(sum(sequence)), -1.0, -2.0]


def answer(req):
    """Rows for a logprobs request, single or batch; 400 when BAD_TOKEN is in it."""
    body = json.loads(req.body)
    sequences = body["batch"] if "batch" in body else [body["tokens"]]
    if any(BAD_TOKEN in sequence for sequence in sequences):
        return reply(400, b'{"error":{"code":"token_out_of_range","message":"id 99"}}')
    return reply(body=pack_answer(sequences, [row_of(s) for s in sequences], 3),
                 headers=[BINARY])


class TurnBatcherTest(unittest.IsolatedAsyncioTestCase):
    async def serve(self, respond=answer, **options):
        self.requests = []

        async def record(req):
            self.requests.append(json.loads(req.body))
            outcome = respond(req)
            return await outcome if asyncio.iscoroutine(outcome) else outcome

        stub = await StubServer(record).__aenter__()
        self.addAsyncCleanup(stub.__aexit__)
        lm = CanopyLM(f"http://127.0.0.1:{stub.port}", array="numpy", **options)
        self.addCleanup(lm.close)
        return lm

    def assert_rows(self, rows, sequences):
        for row, sequence in zip(rows, sequences):
            np.testing.assert_array_equal(row, np.float32(row_of(sequence)))

    async def test_the_calls_of_one_turn_are_one_batch_request(self):
        lm = await self.serve()
        sequences = [[1], [2, 3], [4, 5, 6], [2, 3]]
        rows = await asyncio.gather(*(lm.next_token_logprobs(s) for s in sequences))
        self.assert_rows(rows, sequences)
        self.assertEqual(self.requests, [{"batch": sequences}])

    async def test_calls_in_later_turns_are_requests_of_their_own(self):
        lm = await self.serve()
        first = await lm.next_token_logprobs([1])
        second = await lm.next_token_logprobs([2])
        self.assert_rows([first, second], [[1], [2]])
        self.assertEqual(self.requests, [{"tokens": [1]}, {"tokens": [2]}])

    async def test_without_coalescing_every_call_is_a_request(self):
        lm = await self.serve(coalesce=False)
        sequences = [[1], [2], [3]]
        self.assert_rows(await asyncio.gather(*(lm.next_token_logprobs(s) for s in sequences)),
                         sequences)
        self.assertEqual(sorted(r["tokens"] for r in self.requests), sequences)

    async def test_a_refused_batch_is_asked_again_query_by_query(self):
        lm = await self.serve()
        sequences = [[1], [BAD_TOKEN], [3]]
        results = await asyncio.wait_for(  # every query answered, none left waiting
            asyncio.gather(*(lm.next_token_logprobs(s) for s in sequences),
                           return_exceptions=True), 10)
        self.assert_rows([results[0], results[2]], [[1], [3]])
        self.assertIsInstance(results[1], CanopyRequestError)
        self.assertEqual(results[1].code, "token_out_of_range")
        self.assertEqual(self.requests[0], {"batch": sequences})
        self.assertEqual(sorted(r["tokens"] for r in self.requests[1:]), sorted(sequences))

    async def test_a_failure_of_the_request_reaches_every_query(self):
        lm = await self.serve(lambda req: reply(504, b'{"error":{"code":"deadline_exceeded",'
                                                      b'"message":"slow"}}'))
        results = await asyncio.gather(*(lm.next_token_logprobs([i]) for i in (1, 2, 3)),
                                       return_exceptions=True)
        self.assertEqual([type(r) for r in results], [CanopyError] * 3)
        self.assertEqual({r.code for r in results}, {"deadline_exceeded"})
        self.assertEqual(len(self.requests), 1, "not asked again: the server did not refuse it")

    async def test_a_cancelled_query_leaves_the_others_answered(self):
        async def slow(req):
            await asyncio.sleep(0.2)
            return answer(req)

        lm = await self.serve(slow)
        tasks = [asyncio.ensure_future(lm.next_token_logprobs([i])) for i in (1, 2, 3)]
        await asyncio.sleep(0.05)  # the batch is on the wire
        tasks[1].cancel()
        self.assert_rows([await tasks[0], await tasks[2]], [[1], [3]])
        with self.assertRaises(asyncio.CancelledError):
            await tasks[1]

    async def test_when_every_query_is_cancelled_the_request_is_too(self):
        served = asyncio.Event()

        async def hang_on_the_first(req):
            if json.loads(req.body).get("batch") == [[1], [2]]:
                served.set()
                await asyncio.sleep(30)
            return answer(req)

        # One connection: while the batch's request lived it would hold it.
        lm = await self.serve(hang_on_the_first, max_connections=1, timeout=3)
        tasks = [asyncio.ensure_future(lm.next_token_logprobs([i])) for i in (1, 2)]
        await asyncio.wait_for(served.wait(), 5)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.assert_rows([await lm.next_token_logprobs([5])], [[5]])


if __name__ == "__main__":
    unittest.main()
