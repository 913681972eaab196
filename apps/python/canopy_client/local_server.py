"""``canopy serve`` as a child process: started on a free loopback port, stopped with
SIGTERM (which answers what is in flight and exits 0). ``CanopyLM.from_name`` uses it;
so do the tests."""

import os
import re
import shutil
import signal
import subprocess
import threading

_LISTENING = re.compile(r"canopy serve: listening on (http://\S+)")


def find_canopy(canopy=None):
    """The ``canopy`` program: ``canopy``, else $CANOPY_CLI, else ``canopy`` on PATH."""
    found = canopy or os.environ.get("CANOPY_CLI") or shutil.which("canopy")
    if not found:
        raise FileNotFoundError("the canopy program was not found: pass canopy=PATH, set "
                                "CANOPY_CLI, or put it on PATH")
    return found


class LocalServer:
    """A running ``canopy serve ARGS...`` on 127.0.0.1; ``url`` once ``start`` returns.

    Its stdout and stderr are read all along (a chatty server never blocks on a full
    pipe); ``stderr`` holds what it wrote there.
    """

    def __init__(self, *args, canopy=None, start_timeout=120.0, stop_timeout=30.0):
        self.args = [find_canopy(canopy), "serve", "--host", "127.0.0.1", "--port", "0", *args]
        self.url = None
        self._start_timeout = start_timeout
        self._stop_timeout = stop_timeout
        self._stderr = []
        self._process = None

    def start(self):
        self._process = subprocess.Popen(self.args, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True, errors="replace")
        found = threading.Event()
        self._drains = [threading.Thread(target=self._drain_stdout, args=(found,), daemon=True),
                        threading.Thread(target=self._drain_stderr, daemon=True)]
        for thread in self._drains:
            thread.start()
        if not found.wait(self._start_timeout) or self.url is None:
            self._reap(kill=True)
            raise RuntimeError(f"{' '.join(self.args)} did not start listening within "
                               f"{self._start_timeout}s (exit {self._process.returncode}):\n"
                               f"{self.stderr}")
        return self

    def stop(self):
        """SIGTERM, then the exit code (killed after ``stop_timeout`` seconds)."""
        if self._process is None or self._process.returncode is not None:
            return None if self._process is None else self._process.returncode
        self._process.send_signal(signal.SIGTERM)
        try:
            self._process.wait(self._stop_timeout)
        except subprocess.TimeoutExpired:
            self._reap(kill=True)
            raise RuntimeError(f"canopy serve ignored SIGTERM for {self._stop_timeout}s:\n"
                               f"{self.stderr}") from None
        self._reap()
        return self._process.returncode

    @property
    def stderr(self):
        return "".join(self._stderr)

    def _reap(self, kill=False):
        if kill:
            self._process.kill()
        self._process.wait()
        for thread in self._drains:
            thread.join()
        self._process.stdout.close()
        self._process.stderr.close()

    def _drain_stdout(self, found):
        for line in self._process.stdout:
            match = _LISTENING.search(line)
            if match and self.url is None:
                self.url = match.group(1)
                found.set()
        found.set()  # exited without listening

    def _drain_stderr(self):
        for line in self._process.stderr:
            self._stderr.append(line)
