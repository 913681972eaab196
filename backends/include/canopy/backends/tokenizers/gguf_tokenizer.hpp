#pragma once
// The tokenizer a GGUF file carries in its metadata (tokenizer.ggml.*), as llama.cpp's
// converter writes it:
//  - model "llama" (SentencePiece, Llama 2 and Mistral style): tokens (U+2581 for a
//    space) and scores, merged by score with byte fallback, which is llama2.c's run.c
//    algorithm and llama.cpp's own: served by llama2c_tokenizer. It needs run.c's
//    layout (unk, BOS, EOS at ids 0, 1, 2; <0x00>..<0xFF> at 3..258); another is
//    refused by name.
//  - model "gpt2" (byte-level BPE: GPT-2, Llama 3, Qwen2/2.5/3): tokens, merges, the
//    token types (3 control and 4 user-defined become added tokens, the first special)
//    and the pre-tokenizer's name, tokenizer.ggml.pre: "default"/"gpt2" (GPT-2's regex),
//    "llama-bpe" (Llama 3's, whole words in the vocabulary kept unmerged), "qwen2"
//    (Qwen's, NFC-normalized as its tokenizer.json does). They make the tokenizer.json
//    document of the same tokenizer, served by hf_tokenizer. Other pre-tokenizers are
//    refused by name.
// Both add BOS when asked for special tokens and tokenizer.ggml.add_bos_token says so
// (default: true for "llama", false for "gpt2", as llama.cpp).
// Thread contract: a pure function of the file; the tokenizer is as its class states.

#include <canopy/backends/tokenizers/tokenizer.hpp>

#include <memory>

namespace canopy::backends {

class gguf_file;

/// The tokenizer of `file`; nullptr when it holds none (no tokenizer.ggml.model, or
/// "no_vocab"). Throws tokenizer_error naming the file and what is wrong or not served.
std::unique_ptr<tokenizer_i> load_gguf_tokenizer(const gguf_file& file);

} // namespace canopy::backends
