"""Request bodies, answer readings and error parsing: what travels, without a server."""

import json
import unittest

import numpy as np

from canopy_client import CanopyError, CanopyProtocolError, api
from canopy_client.errors import server_error
from canopy_client.http_connection import encode_request
from canopy_client.vocab import genlm_byte_vocab, str_vocab


class RequestBodyTest(unittest.TestCase):
    def test_token_list_takes_numpy_ints_and_refuses_floats(self):
        self.assertEqual(api.token_list(np.array([1, 2, 3], dtype=np.int64)), [1, 2, 3])
        self.assertEqual(type(api.token_list(np.array([7]))[0]), int)  # JSON-serialisable
        with self.assertRaises(TypeError):
            api.token_list([1, 2.0])

    def test_single_sequence_goes_as_tokens(self):
        self.assertEqual(api.logprobs_body([[1, 2]], batch=False), {"tokens": [1, 2]})

    def test_batch_and_options(self):
        body = api.logprobs_body([[1], [2, 3]], batch=True, all_positions=True, dtype="float16")
        self.assertEqual(body, {"batch": [[1], [2, 3]], "all_positions": True, "dtype": "float16"})

    def test_a_cache_salt_and_an_adapter_go_into_the_body_only_when_given(self):
        self.assertEqual(api.scoped({"tokens": [1]}, None, None), {"tokens": [1]})
        self.assertEqual(api.scoped({"tokens": [1]}, "mine", None),
                         {"tokens": [1], "cache_salt": "mine"})
        self.assertEqual(api.scoped({"tokens": [1]}, None, "tuned"),
                         {"tokens": [1], "adapter": "tuned"})
        self.assertEqual(api.check_cache_salt("é" * 128), "é" * 128)  # 256 bytes
        for bad in ("", b"bytes", "é" * 129):
            with self.assertRaises(ValueError):
                api.check_cache_salt(bad)

    def test_sample_body(self):
        body = api.sample_body([[1, 2]], False, 5, np.array([2]), 0, 7)
        self.assertEqual(body, {"tokens": [1, 2], "max_tokens": 5, "eos_token_ids": [2],
                                "temperature": 0.0, "seed": 7})
        json.dumps(body)

    def test_sample_without_seed_draws_a_fresh_one(self):
        seeds = {api.sample_body([[1]], False, 1, [], 1.0, None)["seed"] for _ in range(8)}
        self.assertGreater(len(seeds), 1)
        self.assertTrue(all(0 <= seed < 2**64 for seed in seeds))

    def test_batch_sample_body(self):
        body = api.sample_body([[1], [1, 5]], True, 3, [], 1.0, 0)
        self.assertEqual(body["batch"], [[1], [1, 5]])
        self.assertNotIn("tokens", body)


class AnswerTest(unittest.TestCase):
    def test_trailing_eos_is_left_out_like_genlm_backend(self):
        self.assertEqual(api.generated_ids([5, 6, 2], [2, 9]), [5, 6])
        self.assertEqual(api.generated_ids([5, 2, 6], [2]), [5, 2, 6])
        self.assertEqual(api.generated_ids([], [2]), [])

    def test_vocab_hex_to_genlm_tokens(self):
        answer = {"vocab": [None, "0a", "20f09f", "", None], "special_tokens": {"0": "</s>"}}
        vocab = genlm_byte_vocab(answer, 5)
        self.assertEqual(vocab, [b"</s>", b"\n", b" \xf0\x9f", b"", b""])
        self.assertEqual([t.token_id for t in vocab], [0, 1, 2, 3, 4])
        self.assertEqual(vocab[2].byte_string, b" \xf0\x9f")
        # Invalid UTF-8 (a cut emoji) takes the token's string, as genlm's decode_vocab.
        strings = ["</s>", "\u010a", "\u0120\u00f0\u0141", "", "\u00a0"]
        self.assertEqual(str_vocab(vocab, strings), ["</s>", "\n", "\u0120\u00f0\u0141", "", ""])
        with self.assertRaises(ValueError):
            genlm_byte_vocab(answer, 6)


class ErrorTest(unittest.TestCase):
    def test_server_error_body(self):
        error = server_error(400, b'{"error": {"code": "token_out_of_range", "message": "tokens[1] is 999"}}')
        self.assertIsInstance(error, CanopyError)
        self.assertEqual((error.status, error.code, error.message),
                         (400, "token_out_of_range", "tokens[1] is 999"))
        self.assertEqual(str(error), "token_out_of_range (HTTP 400): tokens[1] is 999")

    def test_body_that_is_not_the_error_shape(self):
        for body in (b"<html>bad gateway</html>", b'{"error": "x"}', b"[]"):
            error = server_error(502, body)
            self.assertEqual((error.status, error.code), (502, "http_error"))
            self.assertIn("unexpected error body", error.message)

    def test_protocol_error_is_a_canopy_error(self):
        error = CanopyProtocolError("bad framing")
        self.assertIsInstance(error, CanopyError)
        self.assertEqual((error.status, error.code, str(error)), (None, "protocol_error", "protocol_error: bad framing"))


class EncodeRequestTest(unittest.TestCase):
    def test_request_bytes(self):
        request = encode_request("POST", "/v1/logprobs", "127.0.0.1:8080",
                                 {"Accept": "application/octet-stream"}, b'{"tokens":[1]}')
        self.assertEqual(request,
                         b"POST /v1/logprobs HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
                         b"Accept: application/octet-stream\r\nContent-Length: 14\r\n\r\n"
                         b'{"tokens":[1]}')

    def test_get_has_zero_length(self):
        self.assertTrue(encode_request("GET", "/v1/vocab", "h", {}).endswith(b"Content-Length: 0\r\n\r\n"))


if __name__ == "__main__":
    unittest.main()
