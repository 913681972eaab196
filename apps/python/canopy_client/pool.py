"""A bounded pool of keep-alive connections to one server.

Many coroutines may ask at once; at most ``max_connections`` connections are open,
and further requests wait for a free one rather than opening more (a server caps its
connections too, and a connection per request would pay a TCP handshake each time).
Idle connections are reused most-recent first: the one idle longest is the one the
server most likely closed for idleness.
"""

import asyncio

from .http_connection import ClosedBeforeAnswer, HttpConnection


class ConnectionPool:
    """Sends requests over pooled connections, all on one event loop (the first it is
    used on: asyncio primitives bind lazily since Python 3.10)."""

    def __init__(self, host, port, max_connections):
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, not {max_connections}")
        self._host = host
        self._port = port
        self._slots = asyncio.Semaphore(max_connections)
        self._idle = []
        self.opened = 0  # connections opened so far: how well keep-alive works

    async def request(self, request):
        """Send ``request`` (encoded bytes) and return the ``HttpResponse``.

        A reused connection the server closed before answering is the ordinary race
        of keep-alive; the request goes once more on a fresh connection (nothing was
        received, so nothing is answered twice). A fresh connection gets no retry.
        """
        async with self._slots:
            connection = self._take_idle()
            if connection is not None:
                try:
                    return await self._exchange(connection, request)
                except ClosedBeforeAnswer:
                    pass
            connection = await HttpConnection.open(self._host, self._port)
            self.opened += 1
            return await self._exchange(connection, request)

    def _take_idle(self):
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed_by_peer:
                return connection
            connection.close()
        return None

    async def _exchange(self, connection, request):
        try:
            response = await connection.exchange(request)
        finally:
            # Also on cancellation (a caller's timeout): a half-read answer must never
            # be left for the next request to read.
            if connection.reusable:
                self._idle.append(connection)
            else:
                connection.close()
        return response

    async def close(self):
        """Close the idle connections (call once no request is in flight)."""
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
        await asyncio.gather(*(connection.wait_closed() for connection in idle))
