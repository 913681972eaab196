#pragma once
// The C ABI between canopy_backends and its SentencePiece plugin (internal).
//
// Why a plugin: Debian's libsentencepiece embeds its own protobuf-lite and exports all of its
// symbols, while LibTorch loads the system libprotobuf. In one process the two interpose each
// other's symbols and the program crashes during static initialization, before main(). So
// libsentencepiece is never linked into Canopy: the plugin (a MODULE library linking it) is
// dlopen()ed with RTLD_LOCAL | RTLD_DEEPBIND, which keeps its protobuf private to it.
//
// Only C types cross the boundary, and everything the plugin allocates stays in the plugin:
// results are handed out through sink callbacks, valid only during the call.
// Thread contract: canopy_spm_load/free as any constructor/destructor; the const queries and
// encode/decode may run concurrently on one model.

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct canopy_spm canopy_spm;

/// Receives bytes (a message, a decoded text) or ids; `ctx` is the caller's.
typedef void (*canopy_spm_bytes_sink)(void* ctx, const char* data, size_t size);
typedef void (*canopy_spm_ids_sink)(void* ctx, const int* ids, size_t count);

enum {
  canopy_spm_control = 1,
  canopy_spm_unknown = 2,
  canopy_spm_byte = 4,
  canopy_spm_unused = 8,
};

#define CANOPY_SPM_ABI_VERSION 1
/// CANOPY_SPM_ABI_VERSION of the plugin (checked before anything else is used).
typedef int (*canopy_spm_abi_version_fn)(void);
/// A model from the bytes of a .model file; NULL on failure, with the reason sent to `error`.
typedef canopy_spm* (*canopy_spm_load_fn)(const char* bytes, size_t size, canopy_spm_bytes_sink error,
                                          void* ctx);
typedef void (*canopy_spm_free_fn)(canopy_spm* model);
typedef int (*canopy_spm_piece_count_fn)(const canopy_spm* model);
/// The piece text (U+2581 for spaces) to `sink`; returns its canopy_spm_* type flags.
typedef int (*canopy_spm_piece_fn)(const canopy_spm* model, int id, canopy_spm_bytes_sink sink, void* ctx);
typedef int (*canopy_spm_bos_id_fn)(const canopy_spm* model);
/// SentencePiece's Encode; 0 on success, else -1 with the reason sent to `error`.
typedef int (*canopy_spm_encode_fn)(const canopy_spm* model, const char* text, size_t size,
                                    canopy_spm_ids_sink ids, canopy_spm_bytes_sink error, void* ctx);
/// SentencePiece's Decode; 0 on success, else -1 with the reason sent to `error`.
typedef int (*canopy_spm_decode_fn)(const canopy_spm* model, const int* ids, size_t count,
                                    canopy_spm_bytes_sink text, canopy_spm_bytes_sink error, void* ctx);

#ifdef __cplusplus
}
#endif
