#pragma once
// The processor a bench ran on, as its report names it: machines of one kind come with
// AVX2-only and with AVX-512 CPUs, and a figure means little without saying which.
// Thread contract: pure functions (read /proc/cpuinfo and the process's BLAS).

#include <string>

namespace canopy::app {

/// "AMD EPYC, family 25 model 1 (AVX2, no AVX-512)": the first processor's name,
/// family and model in /proc/cpuinfo and what its flags say of the SIMD extensions
/// Canopy's kernels choose between; "unknown CPU" where the file is missing.
std::string cpu_name();

/// What float32 products run on in this process, beside the CPU's name: "products
/// avx512, OpenBLAS Haswell" (the torch backend's cpu_kernels_here).
std::string cpu_kernels();

} // namespace canopy::app
