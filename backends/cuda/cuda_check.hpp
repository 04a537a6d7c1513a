// Status checks for CUDA and cuBLAS calls (backends/cuda, and the CUDA files of train/fused/): a
// failure throws dqntrader::Error naming the call, the status and where it was made.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

namespace dqntrader::cuda {

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line);
void check_cuda(cudaError_t status, const char* call, const char* file, int line);

}  // namespace dqntrader::cuda

#define DQNTRADER_CUBLAS(call) ::dqntrader::cuda::check_cublas((call), #call, __FILE__, __LINE__)
#define DQNTRADER_CUDA(call) ::dqntrader::cuda::check_cuda((call), #call, __FILE__, __LINE__)
