"""A server started with --auth-token-file: the right bearer token works, a wrong or
missing one is refused with 401 unauthorized."""

import json
import os
import tempfile

import numpy as np

from canopy_client import CanopyError, CanopyLM
from canopy_server import ServerTestCase

TOKEN = "s3cret-token-for-the-python-client-tests"


class AuthTest(ServerTestCase):
    client_options = {"auth_token": TOKEN}

    @classmethod
    def setUpClass(cls):
        directory = tempfile.TemporaryDirectory(prefix="canopy-auth-")
        cls.addClassCleanup(directory.cleanup)
        path = os.path.join(directory.name, "token")
        with open(path, "w") as f:
            f.write(TOKEN + "\n")
        cls.server_args = ("--backend", "mock", "--auth-token-file", path)
        super().setUpClass()

    def test_right_token_is_served(self):
        row = self.lm.next_token_logprobs_sync([1, 2, 3])
        self.assertEqual(row.shape, (self.lm.vocab_size,))
        self.assertTrue(np.isfinite(row).all())

    def test_wrong_or_missing_token_is_unauthorized(self):
        for token in ("wrong", TOKEN + "x", None):
            with CanopyLM(self.server.url, auth_token=token, array="numpy") as lm:
                for call, args in ((lm.next_token_logprobs_sync, ([1],)), (lm.clear_cache, ())):
                    with self.assertRaises(CanopyError) as caught:
                        call(*args)
                    self.assertEqual((caught.exception.status, caught.exception.code),
                                     (401, "unauthorized"), token)

    def test_health_check_needs_no_token(self):
        status, _, body = self.server.fetch("GET", "/healthz")
        self.assertEqual((status, json.loads(body)), (200, {"status": "ok"}))
