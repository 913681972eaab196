"""`canopy serve` as a subprocess, for the end-to-end tests.

The client is tested against the real server (CANOPY_CLI, set by CMake), started on
a free port and stopped with SIGTERM, as an operator would: a clean stop must exit 0.
"""

import json
import os
import unittest
import urllib.error
import urllib.request

from canopy_client import CanopyLM
from canopy_client.local_server import LocalServer

START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30


def canopy_cli():
    """The `canopy` binary; without CANOPY_CLI (a run outside ctest) the test skips."""
    cli = os.environ.get("CANOPY_CLI")
    if not cli:
        raise unittest.SkipTest("CANOPY_CLI is not set (ctest sets it to the built canopy binary)")
    return cli


class CanopyServer(LocalServer):
    """A running `canopy serve` (the package's LocalServer), with a raw HTTP client."""

    def __init__(self, *args):
        super().__init__(*args, canopy=canopy_cli(), start_timeout=START_TIMEOUT_S,
                         stop_timeout=STOP_TIMEOUT_S)

    def fetch(self, method, path, body=None, headers=None):
        """(status, headers, body bytes) of one request sent with urllib: an
        independent HTTP client, to check what CanopyLM reads."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.headers, error.read()


class ServerTestCase(unittest.TestCase):
    """Starts one server for the class (``server_args``) with a CanopyLM on it as
    ``cls.lm``, and checks at the end that SIGTERM stops it with exit code 0."""

    server_args = ("--backend", "mock")
    client_options = {}

    @classmethod
    def setUpClass(cls):
        cls.server = CanopyServer(*cls.server_args).start()
        cls.addClassCleanup(cls._stop_server)  # cleanups run in reverse: client first
        cls.lm = CanopyLM(cls.server.url, array="numpy", timeout=60, **cls.client_options)
        cls.addClassCleanup(cls.lm.close)

    @classmethod
    def _stop_server(cls):
        code = cls.server.stop()
        if code != 0:
            raise AssertionError(f"canopy serve exited {code} on SIGTERM, not 0:\n{cls.server.stderr}")
