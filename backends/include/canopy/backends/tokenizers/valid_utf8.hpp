#pragma once
// Whether bytes are strict UTF-8 (no overlong forms, no surrogates, nothing above
// U+10FFFF). The tokenizers' decoders and the HTTP API's token spellings both ask it,
// and must agree on which token bytes are text.
// Thread contract: pure function.

#include <string_view>

namespace canopy::backends {

bool valid_utf8(std::string_view bytes);

} // namespace canopy::backends
