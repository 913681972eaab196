#pragma once
// Which of OpenBLAS's kernel sets the process runs, for reports: a float32 figure means
// little without it. Debian's OpenBLAS is built with DYNAMIC_ARCH and chooses a set
// for the CPU as it loads, unless OPENBLAS_CORETYPE names one; some machines set that
// on purpose (older OpenBLAS builds compute wrong results or crash with their AVX-512
// sets on some recent processors), so Canopy reports the choice and never changes it.
// Thread contract: a pure function.

#include <string>

namespace canopy::backends {

/// OpenBLAS's kernel set ("Haswell", "SkylakeX", ...), "" where the BLAS that the
/// process loaded is not OpenBLAS (looked up, not linked, for that reason).
std::string blas_core();

} // namespace canopy::backends
