"""`canopy serve` as a subprocess, for the end-to-end tests.

The client is tested against the real server (CANOPY_CLI, set by CMake), started on
a free port and stopped with SIGTERM, as an operator would: a clean stop must exit 0.
"""

import json
import os
import re
import signal
import subprocess
import threading
import unittest
import urllib.error
import urllib.request

from canopy_client import CanopyLM

START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30
_LISTENING = re.compile(r"canopy serve: listening on (http://\S+)")


def canopy_cli():
    """The `canopy` binary; without CANOPY_CLI (a run outside ctest) the test skips."""
    cli = os.environ.get("CANOPY_CLI")
    if not cli:
        raise unittest.SkipTest("CANOPY_CLI is not set (ctest sets it to the built canopy binary)")
    return cli


class CanopyServer:
    """A running `canopy serve`; ``url`` once ``start`` returns."""

    def __init__(self, *args):
        self.args = [canopy_cli(), "serve", "--host", "127.0.0.1", "--port", "0", *args]
        self.url = None
        self._stderr = []

    def start(self):
        self._process = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True, errors="replace")
        found = threading.Event()
        self._drains = [threading.Thread(target=self._drain_stdout, args=(found,), daemon=True),
                        threading.Thread(target=self._drain_stderr, daemon=True)]
        for thread in self._drains:
            thread.start()
        if not found.wait(START_TIMEOUT_S) or self.url is None:
            self._reap(kill=True)
            raise AssertionError(f"{' '.join(self.args)} did not print its listening line within "
                                 f"{START_TIMEOUT_S}s (exit {self._process.returncode}):\n{self.stderr}")
        return self

    def stop(self):
        """SIGTERM, then the exit code (the server must answer what is in flight and exit 0)."""
        self._process.send_signal(signal.SIGTERM)
        try:
            self._process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._reap(kill=True)
            raise AssertionError(f"canopy serve ignored SIGTERM for {STOP_TIMEOUT_S}s:\n{self.stderr}")
        self._reap()
        return self._process.returncode

    def _reap(self, kill=False):
        if kill:
            self._process.kill()
        self._process.wait()
        for thread in self._drains:
            thread.join()
        self._process.stdout.close()
        self._process.stderr.close()

    @property
    def stderr(self):
        return "".join(self._stderr)

    def _drain_stdout(self, found):
        # Keeps reading after the listening line so a chatty server never blocks on a full pipe.
        for line in self._process.stdout:
            match = _LISTENING.search(line)
            if match and self.url is None:
                self.url = match.group(1)
                found.set()
        found.set()  # exited without listening

    def _drain_stderr(self):
        for line in self._process.stderr:
            self._stderr.append(line)

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
