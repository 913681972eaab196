"""``CanopyTokenizer.apply_chat_template``: the model's chat template, served by
``GET /v1/tokenizer/chat_templates`` and rendered as transformers renders it, over the
mock with the real Llama 3 and Qwen3 tokenizers (their tokenizer_config.json templates).
The expected texts are the formats the two model families document. Needs
CANOPY_SHARED_DIR; skips without it, or fails when CANOPY_REQUIRE_FIXTURES=1."""

import json
import os
import shutil
import tempfile
import unittest

from canopy_server import ServerTestCase

TOKENIZERS = os.path.join(os.environ.get("CANOPY_SHARED_DIR", ""), "models", "tokenizers")


def tokenizer_file(name):
    path = os.path.join(TOKENIZERS, name, "tokenizer.json")
    if not os.path.isfile(path):
        message = f"{name}'s tokenizer.json not found ({path!r})"
        if os.environ.get("CANOPY_REQUIRE_FIXTURES") == "1":
            raise AssertionError(message + " and CANOPY_REQUIRE_FIXTURES=1")
        raise unittest.SkipTest(message)
    return path


class MockServerWithTokenizer(ServerTestCase):
    tokenizer_name = None

    @classmethod
    def setUpClass(cls):
        cls.server_args = ("--backend", "mock", "--tokenizer", cls.tokenizer_path())
        super().setUpClass()
        cls.tokenizer = cls.lm.tokenizer

    @classmethod
    def tokenizer_path(cls):
        return tokenizer_file(cls.tokenizer_name)


BOS, START_HEADER, END_HEADER, EOT = 128000, 128006, 128007, 128009


class Llama3ChatTest(MockServerWithTokenizer):
    tokenizer_name = "llama3"
    chat = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": " Hi there "}]

    def text_ids(self, text):
        return self.tokenizer.encode(text, add_special_tokens=False)

    def test_the_text_is_llama3s_header_format_with_trimmed_content(self):
        # This tokenizer_config.json (Llama 3's base model) always opens the assistant's turn.
        text = self.tokenizer.apply_chat_template(self.chat, tokenize=False)
        self.assertEqual(text,
                         "<|begin_of_text|>"
                         "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
                         "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
                         "<|start_header_id|>assistant<|end_header_id|>\n\n")

    def test_the_ids_hold_each_control_token_once_and_no_extra_bos(self):
        ids = self.tokenizer.apply_chat_template(self.chat, add_generation_prompt=True)
        expected = [BOS]
        for role, content in (("system", "You are terse."), ("user", "Hi there")):
            expected += [START_HEADER, *self.text_ids(role), END_HEADER,
                         *self.text_ids("\n\n" + content), EOT]
        expected += [START_HEADER, *self.text_ids("assistant"), END_HEADER, *self.text_ids("\n\n")]
        self.assertEqual(ids, expected)
        as_dict = self.tokenizer.apply_chat_template(self.chat, add_generation_prompt=True,
                                                     return_dict=True)
        self.assertEqual(as_dict, {"input_ids": expected, "attention_mask": [1] * len(expected)})

    def test_a_batch_of_chats_gives_one_answer_each(self):
        second = [{"role": "user", "content": "Bye"}]
        texts = self.tokenizer.apply_chat_template([self.chat, second], tokenize=False)
        self.assertEqual(texts, [self.tokenizer.apply_chat_template(self.chat, tokenize=False),
                                 self.tokenizer.apply_chat_template(second, tokenize=False)])
        self.assertEqual(len(self.tokenizer.apply_chat_template([self.chat, second])), 2)

    def test_continue_final_message_stops_after_its_text(self):
        chat = [{"role": "user", "content": "Tell a story."},
                {"role": "assistant", "content": "Once upon"}]
        text = self.tokenizer.apply_chat_template(chat, tokenize=False, continue_final_message=True)
        self.assertTrue(text.endswith("<|start_header_id|>assistant<|end_header_id|>\n\nOnce upon"),
                        text)
        with self.assertRaisesRegex(ValueError, "not compatible"):
            self.tokenizer.apply_chat_template(chat, continue_final_message=True,
                                               add_generation_prompt=True)

    def test_the_template_is_the_configs_and_a_given_one_is_rendered_sandboxed(self):
        with open(os.path.join(TOKENIZERS, "llama3", "tokenizer_config.json")) as config:
            self.assertEqual(self.tokenizer.chat_template, json.load(config)["chat_template"])
        self.assertEqual(self.tokenizer.apply_chat_template(
            self.chat, chat_template="{{ messages|length }}{{ eos_token }}", tokenize=False),
            "2<|end_of_text|>")
        from jinja2.exceptions import SecurityError
        with self.assertRaises(SecurityError):  # a template is data, never code
            self.tokenizer.apply_chat_template(
                self.chat, tokenize=False,
                chat_template="{{ messages.append({'role': 'x'}) }}")
        with self.assertRaises(NotImplementedError):
            self.tokenizer.apply_chat_template(self.chat, return_tensors="pt")


class Qwen3ChatTest(MockServerWithTokenizer):
    tokenizer_name = "qwen3"

    def test_template_variables_reach_the_template(self):
        chat = [{"role": "user", "content": "Hi"}]
        self.assertEqual(
            self.tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True,
                                               enable_thinking=False),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
        self.assertEqual(
            self.tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")

    def test_tools_are_written_as_json_that_keeps_non_ascii_text(self):
        tool = {"type": "function", "function": {
            "name": "get_weather", "description": "Température à Paris",
            "parameters": {"type": "object", "properties": {}}}}
        text = self.tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}],
                                                  tools=[tool], tokenize=False)
        self.assertIn("<tools>\n" + json.dumps(tool, ensure_ascii=False) + "\n</tools>", text)
        with self.assertRaises(TypeError):
            self.tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}],
                                               tools=[len])

    def test_raise_exception_in_a_template_raises(self):
        from jinja2.exceptions import TemplateError
        with self.assertRaisesRegex(TemplateError, "the first message must be the system's"):
            self.tokenizer.apply_chat_template(
                [{"role": "user", "content": "x"}],
                chat_template="{% if messages[0].role != 'system' %}"
                              "{{ raise_exception(\"the first message must be the system's\") }}"
                              "{% endif %}")


class NamedTemplatesTest(MockServerWithTokenizer):
    """A tokenizer_config.json with a list of named templates and no default."""

    @classmethod
    def tokenizer_path(cls):
        folder = tempfile.mkdtemp(prefix="canopy-chat-")
        cls.addClassCleanup(shutil.rmtree, folder)
        os.symlink(tokenizer_file("llama3"), os.path.join(folder, "tokenizer.json"))
        with open(os.path.join(folder, "tokenizer_config.json"), "w") as config:
            json.dump({"chat_template": [{"name": "tool_use", "template": "T{{ messages|length }}"},
                                         {"name": "rag", "template": "R"}]}, config)
        return os.path.join(folder, "tokenizer.json")

    def test_a_name_picks_a_template_and_none_is_the_default(self):
        self.assertEqual(self.tokenizer.chat_template,
                         {"tool_use": "T{{ messages|length }}", "rag": "R"})
        chat = [{"role": "user", "content": "Hi"}]
        self.assertEqual(self.tokenizer.apply_chat_template(chat, chat_template="tool_use",
                                                            tokenize=False), "T1")
        with self.assertRaisesRegex(ValueError, r"\['rag', 'tool_use'\]"):
            self.tokenizer.apply_chat_template(chat)


if __name__ == "__main__":
    unittest.main()
