"""A server started with --auth-token-file: the right bearer token works, a wrong or
missing one is refused with 401 unauthorized."""

import asyncio
import json
import os
import tempfile

import numpy as np

from canopy_client import CanopyError, CanopyLM
from canopy_server import ServerTestCase

TOKEN = "s3cret-token-for-the-python-client-tests"


class TokenFileServer(ServerTestCase):
    """A mock server whose --auth-token-file holds ``tokens``, one per line."""

    tokens = ()

    @classmethod
    def setUpClass(cls):
        directory = tempfile.TemporaryDirectory(prefix="canopy-auth-")
        cls.addClassCleanup(directory.cleanup)
        path = os.path.join(directory.name, "tokens")
        with open(path, "w") as f:
            f.write("".join(token + "\n" for token in cls.tokens))
        cls.server_args = ("--backend", "mock", "--auth-token-file", path)
        super().setUpClass()


class AuthTest(TokenFileServer):
    tokens = (TOKEN,)
    client_options = {"auth_token": TOKEN}

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


FIRST, SECOND = "first-tenant-token-0001", "second-tenant-token-0002"


class TenantsTest(TokenFileServer):
    """Two tokens, two tenants: a client never hits what another tenant's client cached,
    nor what a client with another ``cache_salt`` cached (hits read off /metrics)."""

    tokens = (FIRST, SECOND)
    client_options = {"auth_token": FIRST}

    def hits(self):
        _, _, body = self.server.fetch("GET", "/metrics",
                                       headers={"Authorization": f"Bearer {FIRST}"})
        for line in body.decode().splitlines():
            if line.startswith("canopy_cache_hits_total "):
                return int(float(line.split()[1]))
        self.fail("no canopy_cache_hits_total in /metrics")

    def test_tenants_and_salts_share_no_cached_row(self):
        with CanopyLM(self.server.url, auth_token=SECOND, array="numpy") as other, \
             CanopyLM(self.server.url, auth_token=FIRST, array="numpy",
                      cache_salt="my own") as salted:
            row = self.lm.next_token_logprobs_sync([5, 6, 7])
            before = self.hits()
            np.testing.assert_array_equal(other.next_token_logprobs_sync([5, 6, 7]), row)
            np.testing.assert_array_equal(salted.next_token_logprobs_sync([5, 6, 7]), row)
            self.assertEqual(self.hits(), before, "a hit crossed a tenant or a salt")
            salted.next_token_logprobs_sync([5, 6, 7])
            self.assertEqual(self.hits(), before + 1, "the salted client hits its own row")

    def test_a_bad_cache_salt_is_refused_before_any_request(self):
        for salt in ("", 7, "s" * 257):
            with self.assertRaises(ValueError):
                CanopyLM(self.server.url, auth_token=FIRST, cache_salt=salt)


class LoraTest(TokenFileServer):
    """genlm-backend's adapter calls against a server with a token: add_new_lora loads,
    set_lora runs this client's queries under it (each the row the server gives under
    that adapter, never the base model's or another client's), clear_lora goes back to
    the base model; errors as genlm-backend's."""

    tokens = (TOKEN,)
    client_options = {"auth_token": TOKEN}

    def adapter_dir(self, weights):
        directory = tempfile.TemporaryDirectory(prefix="canopy-lora-")
        self.addCleanup(directory.cleanup)
        for name, text in (("adapter_config.json", '{"r": 4}'),
                           ("adapter_model.safetensors", weights)):
            with open(os.path.join(directory.name, name), "w") as f:
                f.write(text)  # the mock takes any two files as an adapter
        return directory.name

    def server_row(self, tokens, adapter):
        status, _, body = self.server.fetch(
            "POST", "/v1/logprobs", {"tokens": tokens, "adapter": adapter},
            headers={"Authorization": f"Bearer {TOKEN}"})
        self.assertEqual(status, 200, body)
        return np.array(json.loads(body)["logprobs"], dtype=np.float32)

    def test_adapters_are_added_set_and_cleared_as_in_genlm_backend(self):
        tokens = [3, 1, 4]
        base = self.lm.next_token_logprobs_sync(tokens)
        self.lm.add_new_lora(self.adapter_dir("weights of a"), "a")
        self.lm.add_new_lora(self.adapter_dir("weights of b"), lora_name="b")
        self.assertEqual(self.lm.loaded_loras(), ["a", "b"])
        np.testing.assert_array_equal(self.lm.next_token_logprobs_sync(tokens), base,
                                      "loading is not activating")
        with CanopyLM(self.server.url, auth_token=TOKEN, array="numpy") as other:
            self.lm.set_lora(lora_name="a")
            other.set_lora("unused path", "b")
            under_a = asyncio.run(self.lm.next_token_logprobs(tokens))
            np.testing.assert_array_equal(under_a, self.server_row(tokens, "a"))
            np.testing.assert_array_equal(other.next_token_logprobs_sync(tokens),
                                          self.server_row(tokens, "b"))
            self.assertFalse(np.array_equal(under_a, base))
            self.lm.clear_lora()
            np.testing.assert_array_equal(self.lm.next_token_logprobs_sync(tokens), base)
        with self.assertRaisesRegex(ValueError, "has not been loaded yet"):
            self.lm.set_lora(lora_name="missing")
        with self.assertRaises(ValueError):  # a name taken, a directory that is none
            self.lm.add_new_lora(self.adapter_dir("again"), "a")
        with self.assertRaises(ValueError):
            self.lm.add_new_lora("/no/such/adapter", "c")
