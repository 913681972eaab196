"""The vocabulary's ``Token``: Canopy's own class behaves as genlm-backend's does (the
same operations give the same results on both), and ``Token`` is genlm's class where
genlm-backend imports.

genlm's class is read from ../shared/third_party (its token.py imports nothing); without
CANOPY_SHARED_DIR the comparison skips, or fails when CANOPY_REQUIRE_FIXTURES=1.
"""

import copy
import importlib.util
import os
import pickle
import sys
import unittest

from canopy_client import vocab
from canopy_client.vocab import CanopyToken

GENLM_TOKEN = os.path.join(os.environ.get("CANOPY_SHARED_DIR", ""), "third_party", "genlm-backend",
                           "genlm", "backend", "tokenization", "token.py")


def genlm_token_class():
    if not os.path.isfile(GENLM_TOKEN):
        message = f"genlm-backend's token.py not found ({GENLM_TOKEN!r})"
        if os.environ.get("CANOPY_REQUIRE_FIXTURES") == "1":
            raise AssertionError(message + " and CANOPY_REQUIRE_FIXTURES=1")
        raise unittest.SkipTest(message)
    spec = importlib.util.spec_from_file_location("genlm_token_under_test", GENLM_TOKEN)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # so that pickle finds the class again
    spec.loader.exec_module(module)
    return module.Token


def behaviour(token_class):
    """What a battery of operations answers for ``token_class``: ids 3 and 7 spell the
    same bytes (as 88 byte strings of stories260K do), 5 others."""
    a, b, c = token_class(3, b" "), token_class(7, b" "), token_class(5, b"ab")
    return {
        "equal by id, not bytes": (a == b, a != b, a == token_class(3, b"x")),
        "against plain bytes, by content": (a == b" ", b" " == a, a != b" ", c == b"zz"),
        "hash by id": (hash(a) == hash(3), len({a, b, c}), len({a: 0, b: 1})),
        "order by id": ([t.token_id for t in sorted([b, c, a])], a < c, c <= b, b > c, a >= a),
        "a bytes": (isinstance(a, bytes), b"".join([c, a]), c[:1], c.decode(), len(c)),
        "fields": (a.token_id, a.byte_string, type(a.byte_string)),
        "copies keep the id": tuple((type(x) is token_class, x.token_id, bytes(x))
                                    for x in (copy.copy(b), copy.deepcopy(b),
                                              pickle.loads(pickle.dumps(b)))),
        "deep copy of a structure": copy.deepcopy([b, {b: c}])[1] == {b: c},
        "refused arguments": tuple(_raises(token_class, *args)
                                   for args in [(b" ", 3), (3, " "), (3.0, b" ")]),
    }


def _raises(call, *args):
    try:
        call(*args)
    except TypeError:
        return "TypeError"
    return "no error"


class TokenTest(unittest.TestCase):
    def test_canopy_token_keeps_tokens_that_spell_the_same_bytes_apart(self):
        answers = behaviour(CanopyToken)
        self.assertEqual(answers["equal by id, not bytes"], (False, True, True))
        self.assertEqual(answers["hash by id"], (True, 3, 2))
        self.assertEqual(answers["order by id"], ([3, 5, 7], True, True, True, True))
        self.assertEqual(answers["copies keep the id"], ((True, 7, b" "),) * 3)
        self.assertEqual(answers["refused arguments"], ("TypeError",) * 3)

    def test_canopy_token_behaves_as_genlms(self):
        genlm = genlm_token_class()
        self.assertEqual(behaviour(CanopyToken), behaviour(genlm))

    def test_token_is_genlms_class_where_genlm_backend_imports(self):
        try:
            from genlm.backend.tokenization.token import Token
        except ImportError:
            self.assertIs(vocab.Token, CanopyToken)
        else:
            self.assertIs(vocab.Token, Token)

    def test_the_vocabulary_is_made_of_tokens_with_their_ids(self):
        answer = {"vocab": ["20", "20", None, "6162"], "special_tokens": {"2": "</s>"}}
        tokens = vocab.genlm_byte_vocab(answer, 4)
        self.assertEqual([(t.token_id, bytes(t)) for t in tokens],
                         [(0, b" "), (1, b" "), (2, b"</s>"), (3, b"ab")])
        self.assertNotEqual(tokens[0], tokens[1])
        self.assertEqual(len(set(tokens)), 4)


if __name__ == "__main__":
    unittest.main()
