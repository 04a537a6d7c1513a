// Backtests buy-and-hold without costs on a synthetic market through the installed library:
// its total return must equal the last close over the first, less one.
#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdio>

#include "dqntrader/data/synthetic.hpp"
#include "dqntrader/eval/path_evaluator.hpp"

int main(int argc, char** argv) {
  Kokkos::initialize(argc, argv);
  int status = 1;
  {
    using namespace dqntrader;
    data::SynthConfig synth;
    synth.bars = 500;
    const data::Bars bars = data::generate_bars(synth);
    const ExecSpace space;
    Kokkos::View<double*, DeviceMemory> close("close", bars.size());
    Kokkos::View<double*, DeviceMemory> ofi("ofi", bars.size());
    auto host_close = Kokkos::create_mirror_view(close);
    auto host_ofi = Kokkos::create_mirror_view(ofi);
    for (std::size_t i = 0; i < bars.size(); ++i) {
      host_close(i) = bars.close[i];
      host_ofi(i) = bars.ofi[i];
    }
    Kokkos::deep_copy(close, host_close);
    Kokkos::deep_copy(ofi, host_ofi);
    eval::BacktestConfig config;
    config.cost = 0.0;
    const eval::BarRange window{0, bars.size()};
    const auto path =
        eval::builtin_path(space, eval::BuiltinPolicy::buy_and_hold, ofi, window, config);
    eval::PathEvaluator evaluator(space, close, config, window.returns());
    const eval::WindowMetrics metrics = evaluator.evaluate(window.begin, path);
    const double expected = bars.close.back() / bars.close.front() - 1.0;
    std::printf("buy-and-hold total return %.12f, closes give %.12f\n", metrics.total_return,
                expected);
    status =
        std::fabs(metrics.total_return - expected) <= 1e-9 * (1.0 + std::fabs(expected)) ? 0 : 1;
  }
  Kokkos::finalize();
  return status;
}
