#include "cuda_check.hpp"

#include <sstream>

#include "dqntrader/core/error.hpp"

namespace dqntrader::cuda {

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return;
  std::ostringstream message;
  message << "cuBLAS call " << call << " failed with " << cublasLtGetStatusName(status) << " ("
          << cublasLtGetStatusString(status) << ") at " << file << ":" << line;
  throw Error(message.str());
}

void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess)
    return;
  std::ostringstream message;
  message << "CUDA call " << call << " failed with " << cudaGetErrorName(status) << " ("
          << cudaGetErrorString(status) << ") at " << file << ":" << line;
  throw Error(message.str());
}

}  // namespace dqntrader::cuda
