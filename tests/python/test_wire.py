"""The binary log-prob decoder: every field read right, every inconsistency refused."""

import unittest

import numpy as np

from binary_answers import pack_answer, with_field
from canopy_client import CanopyProtocolError, decode_logprobs


class DecodeTest(unittest.TestCase):
    def test_dense_rows_and_sequences(self):
        rows = np.array([[-0.5, -1.5, -2.5], [-3.0, -0.25, -9.0]])
        answer = decode_logprobs(pack_answer([[1, 2], [7]], rows, vocab=3))
        self.assertEqual(answer.sequences, [[1, 2], [7]])
        self.assertEqual(answer.vocab, 3)
        self.assertIsNone(answer.ids)
        self.assertEqual(answer.rows.dtype, np.float32)
        np.testing.assert_array_equal(answer.rows, rows.astype(np.float32))

    def test_rows_are_writable_native_float32(self):
        answer = decode_logprobs(pack_answer([[4]], [[-1.0, -2.0]], vocab=2))
        self.assertTrue(answer.rows.flags.writeable)
        answer.rows[0, 0] = 0.0  # genlm code may normalise in place

    def test_all_positions_has_a_row_per_token(self):
        rows = np.arange(12, dtype=np.float64).reshape(3, 4) * -0.5
        answer = decode_logprobs(pack_answer([[5, 6, 7]], rows, vocab=4))
        np.testing.assert_array_equal(answer.rows, rows.astype(np.float32))

    def test_top_k_ids_beside_values(self):
        answer = decode_logprobs(pack_answer([[3]], [[-0.1, -2.0]], vocab=10, ids=[[9, 0]]))
        np.testing.assert_array_equal(answer.ids, [[9, 0]])
        np.testing.assert_array_equal(answer.rows, np.float32([[-0.1, -2.0]]))

    def test_float16_values_become_float32(self):
        rows = np.array([[-0.125, -7.5, -1000.0]])
        answer = decode_logprobs(pack_answer([[1]], rows, vocab=3, dtype="float16"))
        self.assertEqual(answer.rows.dtype, np.float32)
        np.testing.assert_array_equal(answer.rows, rows.astype(np.float32))

    def test_minus_infinity_survives(self):
        answer = decode_logprobs(pack_answer([[1]], [[0.0, -np.inf]], vocab=2))
        self.assertEqual(answer.rows[0, 1], -np.inf)

    def test_empty_batch(self):
        answer = decode_logprobs(pack_answer([], np.zeros((0, 5)), vocab=5))
        self.assertEqual(answer.rows.shape, (0, 5))
        self.assertEqual(answer.sequences, [])


class RejectTest(unittest.TestCase):
    GOOD = pack_answer([[1, 2]], [[-1.0, -2.0, -3.0]], vocab=3)

    def assert_refused(self, body, words):
        with self.assertRaises(CanopyProtocolError) as caught:
            decode_logprobs(body)
        self.assertIn(words, str(caught.exception))
        self.assertEqual(caught.exception.code, "protocol_error")

    def test_good_answer_is_accepted(self):
        decode_logprobs(self.GOOD)

    def test_shorter_than_header(self):
        self.assert_refused(self.GOOD[:20], "shorter than its 32-byte header")

    def test_wrong_magic(self):
        self.assert_refused(b"NOPE" + self.GOOD[4:], "starts with b'NOPE'")

    def test_wrong_version(self):
        self.assert_refused(with_field(self.GOOD, 4, "<H", 2), "format version 2")

    def test_unknown_dtype(self):
        self.assert_refused(with_field(self.GOOD, 6, "<B", 3), "unknown dtype code 3")

    def test_unknown_layout(self):
        self.assert_refused(with_field(self.GOOD, 7, "<B", 2), "unknown layout 2")

    def test_reserved_not_zero(self):
        self.assert_refused(with_field(self.GOOD, 28, "<I", 1), "reserved field")

    def test_dense_columns_must_equal_vocab(self):
        self.assert_refused(with_field(self.GOOD, 20, "<I", 4), "3 columns for a vocabulary of 4")

    def test_top_k_wider_than_vocab(self):
        body = pack_answer([[1]], [[-1.0, -2.0, -3.0]], vocab=3, ids=[[0, 1, 2]])
        self.assert_refused(with_field(body, 20, "<I", 2), "more than the vocabulary")

    def test_top_k_id_outside_vocab(self):
        self.assert_refused(pack_answer([[1]], [[-1.0]], vocab=3, ids=[[3]]), "outside the vocabulary")

    def test_rows_neither_per_sequence_nor_per_token(self):
        body = pack_answer([[1, 2, 3]], np.zeros((2, 3)), vocab=3)
        self.assert_refused(body, "2 rows for 1 sequences of 3 tokens")

    def test_truncated_values(self):
        self.assert_refused(self.GOOD[:-1], "header says")

    def test_trailing_bytes(self):
        self.assert_refused(self.GOOD + b"\0\0\0\0", "header says")

    def test_lengths_disagree_with_total_tokens(self):
        body = pack_answer([[1, 2], [3, 4]], np.zeros((2, 3)), vocab=3)
        self.assert_refused(with_field(body, 32, "<I", 1), "add up to 3, not total_tokens 4")


if __name__ == "__main__":
    unittest.main()
