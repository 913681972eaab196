"""`canopy serve --backend mock --tokenizer DIR`: the mock over a real vocabulary, as
genlm-backend's MockAsyncLM(tokenizer). Needs CANOPY_SHARED_DIR (GPT-2's tokenizer in
models/gpt2-synthetic); skips without it, or fails when CANOPY_REQUIRE_FIXTURES=1."""

import json
import os
import unittest

from canopy_server import ServerTestCase

GPT2 = os.path.join(os.environ.get("CANOPY_SHARED_DIR", ""), "models", "gpt2-synthetic")


class MockWithTokenizerTest(ServerTestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.isfile(os.path.join(GPT2, "vocab.json")):
            message = f"GPT-2's tokenizer not found ({GPT2!r})"
            if os.environ.get("CANOPY_REQUIRE_FIXTURES") == "1":
                raise AssertionError(message + " and CANOPY_REQUIRE_FIXTURES=1")
            raise unittest.SkipTest(message)
        cls.server_args = ("--backend", "mock", "--tokenizer", GPT2)
        super().setUpClass()

    def test_rows_text_and_special_ids_are_the_tokenizers(self):
        info = self.lm.model_info
        self.assertEqual((info["vocab_size"], info["bos_token_id"], info["eos_token_ids"]),
                         (50257, 50256, [50256]))  # the folder's config.json
        ids = self.lm.tokenizer.encode(" Hello world")
        self.assertEqual(ids, [18435, 995])
        self.assertEqual(self.lm.next_token_logprobs_sync(ids).shape, (50257,))
        self.assertEqual(bytes(self.lm.byte_vocab[50256]), b"<|endoftext|>")
        self.assertEqual(self.lm.tokenizer.decode(ids), " Hello world")

    def test_a_tokenizer_without_a_chat_template_says_so(self):
        status, _, body = self.server.fetch("GET", "/v1/tokenizer/chat_templates")
        self.assertEqual((status, json.loads(body)), (200, {"chat_templates": {}}))
        self.assertIsNone(self.lm.tokenizer.chat_template)
        with self.assertRaisesRegex(ValueError, "chat_template is not set"):
            self.lm.tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}])


if __name__ == "__main__":
    unittest.main()
