// The SentencePiece plugin: a MODULE library, the only Canopy code that links
// libsentencepiece (see sentencepiece_plugin_api.h for why). Each exported function wraps
// one SentencePieceProcessor call; no C++ object or allocation crosses the boundary.
#include "tokenizers/sentencepiece_plugin_api.h"

#include <sentencepiece_processor.h>

#include <exception>
#include <string>
#include <vector>

struct canopy_spm {
  sentencepiece::SentencePieceProcessor processor;
};

namespace {

void send(canopy_spm_bytes_sink sink, void* ctx, const std::string& text) {
  if (sink != nullptr)
    sink(ctx, text.data(), text.size());
}

} // namespace

#define CANOPY_SPM_EXPORT extern "C" __attribute__((visibility("default")))

CANOPY_SPM_EXPORT int canopy_spm_abi_version() {
  return CANOPY_SPM_ABI_VERSION;
}

CANOPY_SPM_EXPORT canopy_spm* canopy_spm_load(const char* bytes, size_t size,
                                              canopy_spm_bytes_sink error, void* ctx) {
  try {
    auto model = new canopy_spm;
    const auto status =
        model->processor.LoadFromSerializedProto(std::string_view(bytes, size));
    if (!status.ok()) {
      delete model;
      send(error, ctx, status.ToString());
      return nullptr;
    }
    return model;
  } catch (const std::exception& e) {
    send(error, ctx, e.what());
    return nullptr;
  }
}

CANOPY_SPM_EXPORT void canopy_spm_free(canopy_spm* model) {
  delete model;
}

CANOPY_SPM_EXPORT int canopy_spm_piece_count(const canopy_spm* model) {
  return model->processor.GetPieceSize();
}

CANOPY_SPM_EXPORT int canopy_spm_piece(const canopy_spm* model, int id,
                                       canopy_spm_bytes_sink sink, void* ctx) {
  const auto& p = model->processor;
  send(sink, ctx, p.IdToPiece(id));
  return (p.IsControl(id) ? canopy_spm_control : 0) |
         (p.IsUnknown(id) ? canopy_spm_unknown : 0) |
         (p.IsByte(id) ? canopy_spm_byte : 0) | (p.IsUnused(id) ? canopy_spm_unused : 0);
}

CANOPY_SPM_EXPORT int canopy_spm_bos_id(const canopy_spm* model) {
  return model->processor.bos_id();
}

CANOPY_SPM_EXPORT int canopy_spm_encode(const canopy_spm* model, const char* text,
                                        size_t size, canopy_spm_ids_sink ids,
                                        canopy_spm_bytes_sink error, void* ctx) {
  try {
    std::vector<int> out;
    const auto status = model->processor.Encode(std::string_view(text, size), &out);
    if (!status.ok()) {
      send(error, ctx, status.ToString());
      return -1;
    }
    ids(ctx, out.data(), out.size());
    return 0;
  } catch (const std::exception& e) {
    send(error, ctx, e.what());
    return -1;
  }
}

CANOPY_SPM_EXPORT int canopy_spm_decode(const canopy_spm* model, const int* ids,
                                        size_t count, canopy_spm_bytes_sink text,
                                        canopy_spm_bytes_sink error, void* ctx) {
  try {
    std::string out;
    const auto status = model->processor.Decode(std::vector<int>(ids, ids + count), &out);
    if (!status.ok()) {
      send(error, ctx, status.ToString());
      return -1;
    }
    send(text, ctx, out);
    return 0;
  } catch (const std::exception& e) {
    send(error, ctx, e.what());
    return -1;
  }
}
