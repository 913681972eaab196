"""One HTTP/1.1 keep-alive connection over asyncio streams.

Only what talking to ``canopy serve`` needs: one request at a time, bodies framed by
``Content-Length`` (the server frames every answer that way), ``Connection: close``
honoured. A connection whose exchange did not finish cleanly is never reused: its
stream position is unknown, and the next request would read the rest of an old answer.
"""

import asyncio
from dataclasses import dataclass
from typing import Dict

from .errors import CanopyProtocolError

_HEAD_END = b"\r\n\r\n"
_HEAD_LIMIT = 64 * 1024  # longest header section accepted from the server


@dataclass(frozen=True)
class HttpResponse:
    """A complete response: status, header fields (lower-case names), body."""

    status: int
    headers: Dict[str, str]
    body: bytes


class ClosedBeforeAnswer(ConnectionError):
    """The peer closed the connection before sending any byte of the answer.

    On a connection that already served requests this is the normal end of a
    keep-alive connection the server closed while idle, and the request can be sent
    again on a fresh one.
    """


def encode_request(method, target, host, headers, body=b""):
    """The bytes of one request, ``Content-Length`` included, ready to write at once."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class HttpConnection:
    """A connection that exchanges one request for one response at a time."""

    def __init__(self, reader, writer):
        self._reader = reader
        self._writer = writer
        self.reusable = True  # false once the exchange failed or the server asked to close
        self.exchanges = 0    # answers received so far

    @classmethod
    async def open(cls, host, port):
        reader, writer = await asyncio.open_connection(host, port, limit=_HEAD_LIMIT)
        return cls(reader, writer)

    @property
    def closed_by_peer(self):
        """Whether the server has already closed it (seen while it sat idle in a pool)."""
        return self._reader.at_eof() or self._writer.transport.is_closing()

    async def exchange(self, request):
        """Send ``request`` (bytes from ``encode_request``) and read the whole response.

        Raises ``ClosedBeforeAnswer`` if the connection ended before any byte of the
        answer arrived, ``CanopyProtocolError`` for an answer that breaks HTTP framing.
        Any failure leaves the connection unusable.
        """
        self.reusable = False
        try:
            self._writer.write(request)
            await self._writer.drain()
            head = await self._reader.readuntil(_HEAD_END)
        except asyncio.IncompleteReadError as error:
            if error.partial:
                raise CanopyProtocolError("connection closed inside the response header") from error
            raise ClosedBeforeAnswer("server closed the connection without answering") from error
        except (ConnectionResetError, BrokenPipeError) as error:
            raise ClosedBeforeAnswer(f"server closed the connection without answering: {error}") from error
        except asyncio.LimitOverrunError as error:
            raise CanopyProtocolError(f"response header longer than {_HEAD_LIMIT} bytes") from error

        version, status, headers = _parse_head(head)
        body = await self._read_body(status, headers)
        self.exchanges += 1
        self.reusable = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
        return HttpResponse(status, headers, body)

    async def _read_body(self, status, headers):
        if "transfer-encoding" in headers:
            raise CanopyProtocolError(
                f"response uses Transfer-Encoding {headers['transfer-encoding']!r}; "
                "canopy serve frames bodies with Content-Length", status)
        if "content-length" not in headers:
            if status in (204, 304):
                return b""
            raise CanopyProtocolError("response has no Content-Length", status)
        try:
            length = int(headers["content-length"])
        except ValueError:
            length = -1
        if length < 0:
            raise CanopyProtocolError(f"bad Content-Length {headers['content-length']!r}", status)
        try:
            return await self._reader.readexactly(length)
        except asyncio.IncompleteReadError as error:
            raise CanopyProtocolError(
                f"connection closed after {len(error.partial)} of {length} body bytes", status) from error

    def close(self):
        self.reusable = False
        self._writer.close()

    async def wait_closed(self):
        try:
            await self._writer.wait_closed()
        except OSError:
            pass  # the peer reset it first: closed all the same


def _parse_head(head):
    """(version, status, headers) from the raw header section, which ends in CRLFCRLF."""
    lines = head[:-len(_HEAD_END)].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise CanopyProtocolError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    headers = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon:
            raise CanopyProtocolError(f"malformed header line {line[:80]!r}")
        headers[name.strip().lower()] = value.strip()
    return parts[0], int(parts[1]), headers
