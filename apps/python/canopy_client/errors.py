"""Errors a Canopy client raises: the server's refusals, and answers it cannot read.

Both are ``CanopyError``, so one ``except`` catches everything Canopy itself reports;
network failures (refused connections, resets) stay the ``OSError`` they are.
"""

import json


class CanopyError(Exception):
    """The server refused a request (a 4xx or 5xx answer).

    ``code`` is the server's stable error code (``token_out_of_range``,
    ``unauthorized``, ...) so callers branch on it rather than on message text;
    ``message`` names the field or value at fault.
    """

    def __init__(self, status, code, message):
        super().__init__(status, code, message)
        self.status = status
        self.code = code
        self.message = message

    def __str__(self):
        status = "" if self.status is None else f" (HTTP {self.status})"
        return f"{self.code}{status}: {self.message}"


class CanopyRequestError(CanopyError, ValueError):
    """The server refused what the request asked (HTTP 400, 413 or 422: an empty
    sequence, an id outside the vocabulary, a sequence past the context, an oversized
    batch). Also a ``ValueError``, which is what genlm-backend raises for such input."""


_REQUEST_STATUSES = (400, 413, 422)


class CanopyProtocolError(CanopyError):
    """The answer broke the HTTP or wire contract: a wrong peer or a bug, never bad input.

    Raised instead of returning numbers that might be misread (a truncated body, a
    binary header that does not match its size, an answer for other tokens).
    """

    def __init__(self, message, status=None):
        super().__init__(status, "protocol_error", message)


def server_error(status, body):
    """The ``CanopyError`` for an error answer's status and body.

    The server always sends ``{"error": {"code", "message"}}``; anything else (a proxy's
    HTML page, say) still becomes a ``CanopyError`` that keeps the status and the text.
    """
    try:
        error = json.loads(body)["error"]
        kind = CanopyRequestError if status in _REQUEST_STATUSES else CanopyError
        return kind(status, str(error["code"]), str(error["message"]))
    except (ValueError, TypeError, KeyError):
        text = body[:200].decode("utf-8", "replace")
        return CanopyError(status, "http_error", f"unexpected error body: {text!r}")
