#pragma once
// SentencePiece .model files through Debian's libsentencepiece, compiled in only when
// CMake found it (CANOPY_HAVE_SENTENCEPIECE, seen by the implementation file alone, so
// this header never needs SentencePiece). libsentencepiece is not linked into Canopy: its
// embedded protobuf crashes a process that also loads LibTorch's libprotobuf, so it sits
// in the plugin libcanopy_sentencepiece.so, dlopen()ed on first use from
// $CANOPY_SENTENCEPIECE_PLUGIN, the running executable's directory, or the build
// directory (src/sentencepiece_plugin_api.h).
//
// encode(text): [BOS] when the model defines one (the Llama convention that llama2.c's
// tokenizer.bin also follows), then SentencePiece's own Encode (normalization, dummy
// prefix, byte fallback as the model was trained). byte_vocab: U+2581 -> space; <0xHH>
// byte pieces -> the byte; control and unknown pieces -> std::nullopt. decode(ids): those
// bytes concatenated (so byte pieces give their true bytes, even when they do not form
// valid UTF-8, where SentencePiece's Decode would write U+FFFD; <unk> writes nothing),
// and, when the model removes its dummy prefix on decode, the first piece with text loses
// its leading space, as SentencePiece's Decode does.
//
// Thread contract: immutable after construction; const methods may be called from many
// threads (SentencePieceProcessor's const Encode keeps no mutable state; the plugin is
// opened once, under a function-local static).

#include <canopy/backends/tokenizers/tokenizer.hpp>

#include <filesystem>
#include <memory>

namespace canopy::backends {

/// True when this build can read .model files (SentencePiece found and its plugin loads).
bool sentencepiece_supported();

/// Loads a SentencePiece .model; tokenizer_error naming the file when it is unreadable or
/// not a model, or when SentencePiece support was not built.
std::unique_ptr<tokenizer_i>
load_sentencepiece_tokenizer(const std::filesystem::path& model_file);

} // namespace canopy::backends
