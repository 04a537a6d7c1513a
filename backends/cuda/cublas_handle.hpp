// The CUDA backend's cuBLAS handle (internal to backends/cuda).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <Kokkos_Core.hpp>

#include <cstddef>

namespace dqntrader::gemm::cuda {

/// Throws dqntrader::Error naming the call, its status, and where it was made.
void check_cublas(cublasStatus_t status, const char* call, const char* file, int line);
void check_cuda(cudaError_t status, const char* call, const char* file, int line);

#define DQNTRADER_CUBLAS(call) \
  ::dqntrader::gemm::cuda::check_cublas((call), #call, __FILE__, __LINE__)
#define DQNTRADER_CUDA(call) ::dqntrader::gemm::cuda::check_cuda((call), #call, __FILE__, __LINE__)

/// One cuBLAS handle per process, created on first use and destroyed by a Kokkos finalize
/// hook, before Kokkos releases the device. It owns an explicit workspace (so that no call
/// allocates, which keeps products capturable into CUDA graphs) and is bound to the stream
/// of the execution-space instance each call runs on.
class CublasHandle {
 public:
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  /// The handle, bound to space's stream with the workspace attached.
  static cublasHandle_t bound_to(const Kokkos::Cuda& space);

  /// Bytes of the workspace handed to cuBLAS.
  static constexpr std::size_t workspace_bytes = std::size_t{32} << 20;

 private:
  CublasHandle();
  ~CublasHandle();
  cublasHandle_t bind(cudaStream_t stream);

  cublasHandle_t m_handle = nullptr;
  cudaStream_t m_stream = nullptr;
  bool m_stream_set = false;
  Kokkos::View<char*, Kokkos::CudaSpace> m_workspace;
};

}  // namespace dqntrader::gemm::cuda
