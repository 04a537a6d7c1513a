#include "cublas_handle.hpp"

#include <sstream>
#include <string>

#include "dqntrader/core/error.hpp"

namespace dqntrader::gemm::cuda {

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return;
  std::ostringstream message;
  message << "cuBLAS call " << call << " failed with " << cublasGetStatusName(status) << " ("
          << cublasGetStatusString(status) << ") at " << file << ":" << line;
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

namespace {
CublasHandle* g_instance = nullptr;
}  // namespace

CublasHandle::CublasHandle()
    : m_workspace(Kokkos::view_alloc(Kokkos::WithoutInitializing,
                                     std::string("dqntrader::gemm::cublas_workspace")),
                  workspace_bytes) {
  DQNTRADER_CUBLAS(cublasCreate(&m_handle));
  DQNTRADER_CUBLAS(cublasSetPointerMode(m_handle, CUBLAS_POINTER_MODE_HOST));
}

CublasHandle::~CublasHandle() {
  // A destructor must not throw; the status of cublasDestroy is of no further use here.
  if (m_handle != nullptr)
    cublasDestroy(m_handle);
}

cublasHandle_t CublasHandle::bind(cudaStream_t stream) {
  if (!m_stream_set || stream != m_stream) {
    DQNTRADER_CUBLAS(cublasSetStream(m_handle, stream));
    // cublasSetStream resets the workspace to cuBLAS's own pool: attach ours again.
    DQNTRADER_CUBLAS(cublasSetWorkspace(m_handle, m_workspace.data(), workspace_bytes));
    m_stream = stream;
    m_stream_set = true;
  }
  return m_handle;
}

cublasHandle_t CublasHandle::bound_to(const Kokkos::Cuda& space) {
  if (g_instance == nullptr) {
    g_instance = new CublasHandle();
    Kokkos::push_finalize_hook([] {
      delete g_instance;
      g_instance = nullptr;
    });
  }
  return g_instance->bind(space.cuda_stream());
}

}  // namespace dqntrader::gemm::cuda
