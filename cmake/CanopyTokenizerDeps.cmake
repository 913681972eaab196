# CanopyTokenizerDeps: the third-party libraries behind backends/'s tokenizers, found with pkg-config.
#
#   PkgConfig::PCRE2          required: GPT-2's pre-tokenizer regex needs Unicode classes (\p{L}, \p{N}, \s),
#                             which PCRE2 provides in UTF + UCP mode (Debian: libpcre2-dev).
#   PkgConfig::UTF8PROC       required: tokenizer.json's NFC/NFKC normalizers on UTF-8 (Debian:
#                             libutf8proc-dev).
#   PkgConfig::SENTENCEPIECE  optional: SentencePiece .model files (Debian: libsentencepiece-dev).
#                             CANOPY_HAVE_SENTENCEPIECE is TRUE when it was found (and the
#                             option CANOPY_WITH_SENTENCEPIECE, default ON, allows it).
#
# The imported targets are GLOBAL because canopy_tokenizers is static: its link interface names
# them, and the test executables in other directories must be able to resolve those names.

find_package(PkgConfig REQUIRED)

if(NOT TARGET PkgConfig::PCRE2)
  pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET GLOBAL libpcre2-8)
endif()

if(NOT TARGET PkgConfig::UTF8PROC)
  pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET GLOBAL libutf8proc)
endif()

option(CANOPY_WITH_SENTENCEPIECE "Support SentencePiece .model tokenizers when libsentencepiece is found" ON)
if(CANOPY_WITH_SENTENCEPIECE AND NOT TARGET PkgConfig::SENTENCEPIECE)
  pkg_check_modules(SENTENCEPIECE QUIET IMPORTED_TARGET GLOBAL sentencepiece)
endif()

if(CANOPY_WITH_SENTENCEPIECE AND TARGET PkgConfig::SENTENCEPIECE)
  set(CANOPY_HAVE_SENTENCEPIECE TRUE)
  message(STATUS "Tokenizers: SentencePiece ${SENTENCEPIECE_VERSION} found; .model files supported")
else()
  set(CANOPY_HAVE_SENTENCEPIECE FALSE)
  message(STATUS "Tokenizers: SentencePiece disabled or not found (libsentencepiece-dev); .model files unsupported")
endif()
