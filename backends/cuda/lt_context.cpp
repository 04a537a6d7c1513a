#include "lt_context.hpp"

#include <string>

#include "cuda_check.hpp"

namespace dqntrader::cuda {

Plan::~Plan() {
  // Destructors must not throw; a failing destroy leaves nothing to act on.
  if (a != nullptr)
    cublasLtMatrixLayoutDestroy(a);
  if (b != nullptr)
    cublasLtMatrixLayoutDestroy(b);
  if (c != nullptr)
    cublasLtMatrixLayoutDestroy(c);
  if (operation != nullptr)
    cublasLtMatmulDescDestroy(operation);
}

struct LtContextDeleter {
  static LtContext*& slot() {
    static LtContext* context = nullptr;
    return context;
  }
  static void release() {
    delete slot();
    slot() = nullptr;
  }
};

LtContext::LtContext() {
  DQNTRADER_CUBLAS(cublasLtCreate(&m_handle));
}

LtContext::~LtContext() {
  m_plans.clear();
  m_workspaces.clear();
  if (m_handle != nullptr)
    cublasLtDestroy(m_handle);
}

LtContext& LtContext::instance() {
  LtContext*& context = LtContextDeleter::slot();
  if (context == nullptr) {
    context = new LtContext();
    Kokkos::push_finalize_hook(&LtContextDeleter::release);
  }
  return *context;
}

void* LtContext::workspace(cudaStream_t stream) {
  auto found = m_workspaces.find(stream);
  if (found == m_workspaces.end()) {
    found = m_workspaces
                .emplace(stream,
                         Kokkos::View<char*, Kokkos::CudaSpace>(
                             Kokkos::view_alloc(Kokkos::WithoutInitializing,
                                                std::string("dqntrader::gemm::cublaslt_workspace")),
                             workspace_bytes + 256))
                .first;
  }
  const auto address = reinterpret_cast<std::uintptr_t>(found->second.data());
  return reinterpret_cast<void*>((address + 255) & ~std::uintptr_t{255});
}

Plan* LtContext::find(const PlanKey& key) {
  const auto found = m_plans.find(key);
  return found == m_plans.end() ? nullptr : found->second.get();
}

Plan& LtContext::insert(const PlanKey& key, std::unique_ptr<Plan> plan) {
  return *(m_plans[key] = std::move(plan));
}

}  // namespace dqntrader::cuda
