// DQNTRADER_UNROLL before a loop of a constant count: unrolled in CUDA device code, so that the
// arrays it indexes stay in registers (nvcc keeps an array indexed by a loop it does not unroll
// in local memory); nothing on the host, whose compilers choose for themselves.
#pragma once

#if defined(__CUDA_ARCH__)
#define DQNTRADER_UNROLL _Pragma("unroll")
#else
#define DQNTRADER_UNROLL
#endif
