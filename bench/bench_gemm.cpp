// Matrix products at the shapes of the DQN reference workloads (docs/BENCHMARKS.md,
// Reference workloads): the layers 64 -> 512 -> 512 -> 512 -> 3 at training batch 1,024
// (forward, the activation-gradient product dX = dY W^T and the weight-gradient product
// dW = X^T dY), the first layer over one 1,000,000-bar evaluation chunk, and one large square
// product as the ceiling this machine's library reaches. Reports FLOP/s; times on the device
// with a fence before and after each timed region.
#include <benchmark/benchmark.h>
#include <Kokkos_Core.hpp>

#include <chrono>
#include <string>

#include "backends/gemm.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/types.hpp"

namespace dqntrader {
namespace {

using gemm::Op;

enum class Mode { fp32, tf32, bf16_to_float, bf16_to_bf16 };

struct Case {
  const char* name;
  Op op_a, op_b;
  std::size_t m, n, k;
};

template <class T>
Matrix<T> filled(const ExecSpace& space, std::size_t rows, std::size_t cols, float value) {
  Matrix<T> x(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string("bench::matrix")),
              rows, cols);
  Kokkos::parallel_for(
      "dqntrader::bench::fill",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(space, {0, 0}, {rows, cols}),
      KOKKOS_LAMBDA(const int i, const int j) {
        // A deterministic pseudo-random pattern in [-1, 1): no zeros, no structure the
        // library could exploit.
        const unsigned h = (static_cast<unsigned>(i) * 2654435761u) ^
                           (static_cast<unsigned>(j) * 2246822519u) ^ 0x9e3779b9u;
        const float v = value * (static_cast<float>(h % 2001u) / 1000.0f - 1.0005f);
        store(x(i, j), v);
      });
  return x;
}

template <class TAB, class TC>
void run_case(benchmark::State& state, const Case& c, Mode mode) {
  const ExecSpace space;
  const std::size_t a_rows = c.op_a == Op::none ? c.m : c.k;
  const std::size_t a_cols = c.op_a == Op::none ? c.k : c.m;
  const std::size_t b_rows = c.op_b == Op::none ? c.k : c.n;
  const std::size_t b_cols = c.op_b == Op::none ? c.n : c.k;
  Matrix<TAB> a = filled<TAB>(space, a_rows, a_cols, 1.0f);
  Matrix<TAB> b = filled<TAB>(space, b_rows, b_cols, 0.05f);
  Matrix<TC> out = filled<TC>(space, c.m, c.n, 1.0f);
  auto product = [&] {
    if constexpr (std::is_same<TAB, float>::value) {
      gemm::gemm(space, mode == Mode::tf32 ? Precision::tf32 : Precision::fp32, c.op_a, c.op_b,
                 1.0f, a, b, 0.0f, out);
    } else {
      gemm::gemm(space, c.op_a, c.op_b, 1.0f, a, b, 0.0f, out);
    }
  };
  product();  // warm-up: handle creation, library heuristics, first-touch
  compat::fence(space, "dqntrader::bench::gemm: warm-up done before timing");
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    product();
    compat::fence(space, "dqntrader::bench::gemm: the product must finish inside the timing");
    const auto stop = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(stop - start).count());
  }
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * c.m * c.n * c.k, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["m"] = static_cast<double>(c.m);
  state.counters["n"] = static_cast<double>(c.n);
  state.counters["k"] = static_cast<double>(c.k);
}

void register_all() {
  const std::size_t batch = 1024;
  const Case cases[] = {
    {"train_forward_64x512", Op::none, Op::none, batch, 512, 64},
    {"train_forward_512x512", Op::none, Op::none, batch, 512, 512},
    {"train_forward_512x3", Op::none, Op::none, batch, 3, 512},
    {"train_dgrad_512x64", Op::none, Op::transpose, batch, 64, 512},
    {"train_dgrad_512x512", Op::none, Op::transpose, batch, 512, 512},
    {"train_dgrad_3x512", Op::none, Op::transpose, batch, 512, 3},
    {"train_wgrad_64x512", Op::transpose, Op::none, 64, 512, batch},
    {"train_wgrad_512x512", Op::transpose, Op::none, 512, 512, batch},
    {"train_wgrad_512x3", Op::transpose, Op::none, 512, 3, batch},
    {"eval_1M_64x512", Op::none, Op::none, 1000000, 512, 64},
#if defined(DQNTRADER_BACKEND_CUDA)
    {"ceiling_8192", Op::none, Op::none, 8192, 8192, 8192},
#else
    {"ceiling_2048", Op::none, Op::none, 2048, 2048, 2048},
#endif
  };
  for (const Case& c : cases) {
    auto add = [&](const char* mode_name, auto run) {
      benchmark::RegisterBenchmark((std::string("gemm/") + c.name + "/" + mode_name).c_str(), run)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    };
    add("fp32", [c](benchmark::State& s) { run_case<float, float>(s, c, Mode::fp32); });
    // On the host every mode computes in fp32 (see backends/gemm.hpp): only fp32 is timed.
#if defined(DQNTRADER_BACKEND_CUDA)
    add("tf32", [c](benchmark::State& s) { run_case<float, float>(s, c, Mode::tf32); });
    add("bf16_to_float",
        [c](benchmark::State& s) { run_case<bf16, float>(s, c, Mode::bf16_to_float); });
    add("bf16_to_bf16",
        [c](benchmark::State& s) { run_case<bf16, bf16>(s, c, Mode::bf16_to_bf16); });
#endif
  }
}

const bool registered = (register_all(), true);

}  // namespace
}  // namespace dqntrader
