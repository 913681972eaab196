"""CanopyLM's own checks and lifetime, against a scripted server that misbehaves in
ways `canopy serve` does not: answers for other tokens, wrong content types, slowness.
"""

import asyncio
import json
import time
import unittest

import numpy as np

from binary_answers import pack_answer
from canopy_client import CanopyError, CanopyLM, CanopyProtocolError
from stub_server import StubServer, reply

BINARY = "Content-Type: application/octet-stream"


def binary_reply(sequences, rows, vocab=3):
    return reply(body=pack_answer(sequences, rows, vocab), headers=[BINARY])


class LmAgainstStubTest(unittest.IsolatedAsyncioTestCase):
    async def serve(self, respond, **options):
        stub = await StubServer(respond).__aenter__()
        self.addAsyncCleanup(stub.__aexit__)
        lm = CanopyLM(f"http://127.0.0.1:{stub.port}", array="numpy", **options)
        self.addCleanup(lm.close)
        return stub, lm

    async def test_request_as_sent(self):
        seen = []

        def record(req):
            seen.append(req)
            return binary_reply([[4, 5]], [[-1.0, -2.0, -3.0]])

        _, lm = await self.serve(record, auth_token="t0k")
        row = await lm.next_token_logprobs(np.array([4, 5]))
        np.testing.assert_array_equal(row, np.float32([-1.0, -2.0, -3.0]))
        (req,) = seen
        self.assertEqual((req.method, req.target), ("POST", "/v1/logprobs"))
        self.assertEqual(req.headers["accept"], "application/octet-stream")
        self.assertEqual(req.headers["authorization"], "Bearer t0k")
        self.assertEqual(json.loads(req.body), {"tokens": [4, 5]})

    async def test_answer_for_other_tokens_is_refused(self):
        _, lm = await self.serve(lambda req: binary_reply([[9]], [[-1.0, -2.0, -3.0]]))
        with self.assertRaisesRegex(CanopyProtocolError, "other token sequences"):
            await lm.next_token_logprobs([4])

    async def test_wrong_row_count_is_refused(self):
        # one row where all_positions asked for one per token
        _, lm = await self.serve(lambda req: binary_reply([[1, 2]], [[-1.0, -2.0, -3.0]]))
        with self.assertRaisesRegex(CanopyProtocolError, "expected 2 dense rows, got 1"):
            await lm.prefix_logprobs([1, 2])

    async def test_json_where_binary_was_asked_is_refused(self):
        _, lm = await self.serve(lambda req: reply(body=b'{"tokens":[1],"logprobs":[0]}',
                                                   headers=["Content-Type: application/json"]))
        with self.assertRaisesRegex(CanopyProtocolError, "asked for application/octet-stream"):
            await lm.next_token_logprobs([1])

    async def test_unexpected_status(self):
        _, lm = await self.serve(lambda req: reply(302, headers=["Location: /elsewhere"]))
        with self.assertRaisesRegex(CanopyProtocolError, "unexpected HTTP status 302"):
            await lm.next_token_logprobs([1])

    async def test_server_error_reaches_the_caller(self):
        body = b'{"error":{"code":"deadline_exceeded","message":"too slow"}}'
        _, lm = await self.serve(lambda req: reply(504, body))
        with self.assertRaises(CanopyError) as caught:
            await lm.sample([1], 3, [])
        self.assertEqual((caught.exception.status, caught.exception.code, caught.exception.message),
                         (504, "deadline_exceeded", "too slow"))

    async def test_server_busy_is_asked_again_after_retry_after(self):
        busy = reply(503, b'{"error":{"code":"server_busy","message":"full"}}',
                     headers=["Retry-After: 0.05"])
        answers = [busy, busy, binary_reply([[4]], [[-1.0, -2.0, -3.0]])]
        stub, lm = await self.serve(lambda req: answers.pop(0))
        started = time.monotonic()
        row = await lm.next_token_logprobs([4])
        np.testing.assert_array_equal(row, np.float32([-1.0, -2.0, -3.0]))
        self.assertEqual(answers, [], "asked three times")
        self.assertGreaterEqual(time.monotonic() - started, 0.1, "it waited as told")

    async def test_a_503_without_retry_after_reaches_the_caller(self):
        body = b'{"error":{"code":"worker_lost","message":"gone"}}'
        _, lm = await self.serve(lambda req: reply(503, body))
        with self.assertRaises(CanopyError) as caught:
            await lm.next_token_logprobs([4])
        self.assertEqual(caught.exception.code, "worker_lost")

    async def test_timeout_then_the_client_still_works(self):
        async def slow_then_fast(req):
            if json.loads(req.body)["tokens"] == [1]:
                await asyncio.sleep(0.5)
            return binary_reply([json.loads(req.body)["tokens"]], [[-1.0, -2.0, -3.0]])

        _, lm = await self.serve(slow_then_fast, timeout=0.1)
        with self.assertRaises(asyncio.TimeoutError):
            await lm.next_token_logprobs([1])
        self.assertEqual((await lm.next_token_logprobs([2])).shape, (3,))

    async def test_close_cancels_requests_in_flight(self):
        async def late(req):
            await asyncio.sleep(1)  # then hang up unanswered

        _, lm = await self.serve(late)
        pending = asyncio.ensure_future(lm.next_token_logprobs([1]))
        await asyncio.sleep(0.05)  # the request is on the wire
        started = time.monotonic()
        lm.close()
        with self.assertRaises(asyncio.CancelledError):
            await pending
        self.assertLess(time.monotonic() - started, 5)


if __name__ == "__main__":
    unittest.main()
