"""Keep-alive, the connection bound, the stale-connection retry and HTTP framing,
against a scripted server (the cases the real server cannot be made to produce)."""

import asyncio
import unittest

from canopy_client import CanopyProtocolError
from canopy_client.http_connection import encode_request
from canopy_client.pool import ConnectionPool
from stub_server import StubServer, ThenClose, reply


def request(body=b""):
    return encode_request("POST", "/echo", "stub", {}, body)


def echo(req):
    return reply(body=req.body)


class PoolTest(unittest.IsolatedAsyncioTestCase):
    async def pool_for(self, stub, max_connections=8):
        pool = ConnectionPool("127.0.0.1", stub.port, max_connections)
        self.addAsyncCleanup(pool.close)
        return pool

    async def test_sequential_requests_share_one_connection(self):
        async with StubServer(echo) as stub:
            pool = await self.pool_for(stub)
            for i in range(5):
                response = await pool.request(request(b"%d" % i))
                self.assertEqual((response.status, response.body), (200, b"%d" % i))
            self.assertEqual((stub.connections, pool.opened), (1, 1))

    async def test_concurrency_is_bounded_by_max_connections(self):
        async def slow_echo(req):
            await asyncio.sleep(0.005)
            return echo(req)

        async with StubServer(slow_echo) as stub:
            pool = await self.pool_for(stub, max_connections=4)
            bodies = [b"%d" % i for i in range(60)]
            responses = await asyncio.gather(*(pool.request(request(b)) for b in bodies))
            self.assertEqual([r.body for r in responses], bodies)
            self.assertEqual(stub.most_open, 4)
            self.assertEqual(stub.connections, 4)

    async def test_reused_connection_closed_on_arrival_is_retried_once_on_a_fresh_one(self):
        def close_second_request_on_first_connection(req):
            if req.connection == 0 and req.on_connection == 1:
                return None
            return echo(req)

        async with StubServer(close_second_request_on_first_connection) as stub:
            pool = await self.pool_for(stub)
            self.assertEqual((await pool.request(request(b"a"))).body, b"a")
            self.assertEqual((await pool.request(request(b"b"))).body, b"b")
            self.assertEqual(stub.connections, 2)

    async def test_no_second_retry(self):
        def close_all_but_the_first_request(req):
            return echo(req) if req.connection == 0 and req.on_connection == 0 else None

        async with StubServer(close_all_but_the_first_request) as stub:
            pool = await self.pool_for(stub)
            await pool.request(request(b"a"))
            with self.assertRaises(ConnectionError):
                await pool.request(request(b"b"))
            self.assertEqual(stub.connections, 2)

    async def test_fresh_connection_closed_without_answer_is_not_retried(self):
        async with StubServer(lambda req: None) as stub:
            pool = await self.pool_for(stub)
            with self.assertRaisesRegex(ConnectionError, "without answering"):
                await pool.request(request())
            self.assertEqual(stub.connections, 1)

    async def test_connection_idle_closed_by_server_is_not_reused(self):
        async with StubServer(lambda req: reply(body=req.body)) as stub:
            pool = await self.pool_for(stub)
            await pool.request(request(b"a"))
            (connection,) = pool._idle
            connection._writer.transport.abort()  # as if the peer had gone
            self.assertEqual((await pool.request(request(b"b"))).body, b"b")
            self.assertEqual(stub.connections, 2)

    async def test_connection_close_header_is_honoured(self):
        async with StubServer(lambda req: reply(body=b"x", headers=["Connection: close"])) as stub:
            pool = await self.pool_for(stub)
            await pool.request(request())
            await pool.request(request())
            self.assertEqual(stub.connections, 2)

    async def test_abandoned_answer_is_never_read_by_the_next_request(self):
        async def first_answer_late(req):
            if req.connection == 0:
                await asyncio.sleep(0.3)
            return echo(req)

        async with StubServer(first_answer_late) as stub:
            pool = await self.pool_for(stub)
            with self.assertRaises(asyncio.TimeoutError):
                await asyncio.wait_for(pool.request(request(b"old")), 0.05)
            self.assertEqual((await pool.request(request(b"new"))).body, b"new")
            self.assertEqual(stub.connections, 2)

    async def test_error_status_keeps_the_connection(self):
        async with StubServer(lambda req: reply(400, b'{"error": {}}')) as stub:
            pool = await self.pool_for(stub)
            for _ in range(3):
                self.assertEqual((await pool.request(request())).status, 400)
            self.assertEqual(stub.connections, 1)


class FramingTest(unittest.IsolatedAsyncioTestCase):
    async def answer_with(self, raw):
        async with StubServer(lambda req: raw) as stub:
            pool = ConnectionPool("127.0.0.1", stub.port, 1)
            try:
                return await pool.request(request())
            finally:
                await pool.close()

    async def test_headers_are_read_case_insensitively(self):
        response = await self.answer_with(b"HTTP/1.1 201 Created\r\nCONTENT-LENGTH: 2\r\nX-A: b c\r\n\r\nok")
        self.assertEqual((response.status, response.headers["x-a"], response.body), (201, "b c", b"ok"))

    async def test_missing_content_length(self):
        with self.assertRaisesRegex(CanopyProtocolError, "no Content-Length"):
            await self.answer_with(b"HTTP/1.1 200 OK\r\n\r\nbody")

    async def test_chunked_is_refused_clearly(self):
        with self.assertRaisesRegex(CanopyProtocolError, "Transfer-Encoding"):
            await self.answer_with(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")

    async def test_truncated_body(self):
        with self.assertRaisesRegex(CanopyProtocolError, "after 3 of 10 body bytes"):
            await self.answer_with(ThenClose(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"))

    async def test_closed_inside_the_header(self):
        with self.assertRaisesRegex(CanopyProtocolError, "inside the response header"):
            await self.answer_with(ThenClose(b"HTTP/1.1 200 OK\r\nContent-Le"))

    async def test_not_http(self):
        with self.assertRaisesRegex(CanopyProtocolError, "not an HTTP/1.x status line"):
            await self.answer_with(b"SSH-2.0-OpenSSH\r\n\r\n")


if __name__ == "__main__":
    unittest.main()
