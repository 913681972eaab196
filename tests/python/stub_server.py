"""A scripted HTTP/1.1 server on asyncio streams, for the client's transport tests.

It produces what ``canopy serve`` cannot be made to on demand: a keep-alive
connection closed just as a request arrives, a slow answer, broken framing. It runs
on the test's own event loop.
"""

import asyncio
import inspect
from dataclasses import dataclass


@dataclass
class StubRequest:
    method: str
    target: str
    headers: dict
    body: bytes
    connection: int  # 0-based index of the connection it came on
    on_connection: int  # 0-based index of the request on that connection


class ThenClose(bytes):
    """Response bytes after which the stub closes the connection."""


def reply(status=200, body=b"", headers=()):
    """A response with its Content-Length."""
    head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class StubServer:
    """Answers each request with ``respond(request)``: response bytes, ``ThenClose(bytes)``
    to close after them, or None to close without answering. ``respond`` may be a
    coroutine function."""

    def __init__(self, respond):
        self._respond = respond
        self.connections = 0  # opened so far
        self.open_now = 0
        self.most_open = 0
        self._writers = set()  # the connections open now

    async def __aenter__(self):
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info):
        # Since Python 3.12, wait_closed() waits for every connection to end, and a pool
        # under test closes its idle connections only in the test's cleanup, after this:
        # the server ends its side first, as a server shutting down does.
        self._server.close()
        for writer in self._writers:
            writer.close()
        await self._server.wait_closed()

    async def _serve(self, reader, writer):
        index, served = self.connections, 0
        self.connections += 1
        self.open_now += 1
        self.most_open = max(self.most_open, self.open_now)
        self._writers.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ")
                headers = {k.strip().lower(): v.strip()
                           for k, _, v in (line.partition(":") for line in lines[1:] if line)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                answer = self._respond(StubRequest(method, target, headers, body, index, served))
                if inspect.isawaitable(answer):
                    answer = await answer
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
                served += 1
                if isinstance(answer, ThenClose):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open_now -= 1
            self._writers.discard(writer)
            writer.close()
