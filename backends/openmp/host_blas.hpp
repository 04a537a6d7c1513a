// The OpenMP backend's choice of OpenBLAS kernels (host_blas.cpp), apart so that the suite can
// check the rule itself.
#pragma once

#include <string>

namespace dqntrader::gemm {

/// The OpenBLAS core (OPENBLAS_CORETYPE value) to run instead of `core`, the one OpenBLAS
/// picked, on a CPU with AVX-512 (F, CD, BW, DQ, VL) or AVX2 and FMA: SkylakeX when the CPU
/// has AVX-512 and the core has no AVX-512 kernels, Haswell when it has AVX2 and the core none
/// (Prescott, OpenBLAS's fallback for a CPU it does not know, and the other older cores);
/// nullptr to keep the core.
const char* better_openblas_core(const std::string& core, bool avx512, bool avx2);

}  // namespace dqntrader::gemm
