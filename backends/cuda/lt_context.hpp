// The CUDA backend's cuBLASLt state (internal to backends/cuda): one handle per process,
// an explicit workspace per stream (so that no product allocates, which keeps products capturable
// into CUDA graphs), and a cache of planned products: descriptors and the algorithm the
// heuristic chose, keyed by everything that shapes them. Created on first use, released by
// a Kokkos finalize hook before Kokkos releases the device.
#pragma once

#include <cublasLt.h>
#include <Kokkos_Core.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

namespace dqntrader::cuda {

/// Everything that determines a planned product (column-major, as cuBLASLt sees it).
struct PlanKey {
  std::array<std::int64_t, 20> fields;
  bool operator<(const PlanKey& other) const { return fields < other.fields; }
};

/// Descriptors and algorithm of one product shape; non-copyable, destroyed with the cache.
class Plan {
 public:
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan();

  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

class LtContext {
 public:
  LtContext(const LtContext&) = delete;
  LtContext& operator=(const LtContext&) = delete;

  static LtContext& instance();

  cublasLtHandle_t handle() const { return m_handle; }
  /// The workspace of the products enqueued on stream, 256-byte aligned as cuBLASLt wants it
  /// (Kokkos allocations are 128-byte aligned): one per stream, so that products on two
  /// streams may run at once. Allocated on a stream's first product, which therefore must not
  /// be inside a capture.
  void* workspace(cudaStream_t stream);
  static constexpr std::size_t workspace_bytes = std::size_t{32} << 20;

  /// The cached plan for key, or nullptr.
  Plan* find(const PlanKey& key);
  Plan& insert(const PlanKey& key, std::unique_ptr<Plan> plan);

 private:
  LtContext();
  ~LtContext();
  friend struct LtContextDeleter;

  cublasLtHandle_t m_handle = nullptr;
  std::map<cudaStream_t, Kokkos::View<char*, Kokkos::CudaSpace>> m_workspaces;
  std::map<PlanKey, std::unique_ptr<Plan>> m_plans;
};

}  // namespace dqntrader::cuda
