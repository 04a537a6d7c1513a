#!/usr/bin/env bash
# Run on the GPU machine over a copy of the tree (carry: [".carry"], prepared here by
# scripts/device/prepare-carry.sh): builds patched Kokkos (3.4.01, or with --kokkos 4.6.01
# the upstream release) with CUDA for sm_90 and the CUDA variant (only DQNTRADER_BUILD_TARGET
# when set) into build/cuda (build/cuda-kokkos-4.6.01), then runs the steps named (default: the
# first six). Logs go to $OUT (with --kokkos 4.6.01 under $OUT/kokkos-4.6.01/).
#   scripts/device/cuda-suite.sh [--kokkos 4.6.01] [test] [gemm] [eval] [eval-peer] [train]
#                                [train-peer] [pop] [pop-peer] [defaults] [sanitizer] [racecheck]
#                                [profile] [pop-profile] [stalls] [detail] [compare]
#                                [selection] [schedule] [mpi] [fused] [decisions] [module]
#                                [export] [sweep]
# With mpi the build has DQNTRADER_ENABLE_MPI (the test step then runs the MPI sweep test too).
set -uo pipefail
kokkos=3.4.01
if [ "${1:-}" = --kokkos ]; then
  kokkos=$2
  shift 2
fi
steps=${*:-test gemm eval eval-peer train train-peer}
want() { case " $steps " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
out=${OUT:-$root/out}
build=build/cuda
expect=30401
if [ "$kokkos" != 3.4.01 ]; then
  out=$out/kokkos-$kokkos
  build=build/cuda-kokkos-$kokkos
  expect=$(echo "$kokkos" | awk -F. '{ printf "%d%02d%02d", $1, $2, $3 }')
fi
mkdir -p "$out"
runs=$(mktemp -d)  # run directories of the steps below: only logs go to $out
export PATH=/usr/local/cuda/bin:$PATH
jobs=$(nproc)
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  nvcc --version | tail -n 2
  cmake --version | head -n 1
  g++ --version | head -n 1
} 2>&1 | tee "$out/setup.log"

start=$SECONDS
prefix=$(scripts/bootstrap.sh --cuda --kokkos "$kokkos" --tarballs "$root/.carry/deps/tarballs" \
  --no-apt --deps-dir "$root/.carry/deps" --jobs "$jobs" \
  --print-prefix 2> >(tee -a "$out/setup.log" >&2)) || { echo "bootstrap failed"; exit 1; }
echo "bootstrap: $((SECONDS - start)) s" | tee -a "$out/setup.log"
export KOKKOS_PREFIX=$prefix
# The carried Debian libraries (ONNX's and protobuf's among them) where the programs look.
export LD_LIBRARY_PATH="$root/.carry/debroot/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

start=$SECONDS
options=()
want mpi && options+=(-DDQNTRADER_ENABLE_MPI=ON)
# The export with the carried ONNX and protobuf (their shared libraries found at run time
# through the build's run path); the module for the machine's python3 (its pybind11).
[ -d "$root/.carry/debroot/usr/include/onnx" ] && options+=(-DDQNTRADER_ENABLE_ONNX=ON)
if want module; then
  options+=(-DDQNTRADER_ENABLE_PYTHON=ON "-DPython_EXECUTABLE=$(command -v python3)"
    "-Dpybind11_DIR=$(python3 -m pybind11 --cmakedir)")
fi
cmake --preset cuda -B "$build" -DCMAKE_PREFIX_PATH="$root/.carry/debroot/usr;$prefix" \
  -DDQNTRADER_EXPECT_KOKKOS_VERSION="$expect" -DCMAKE_CXX_FLAGS=-lineinfo "${options[@]}" \
  >"$out/configure.log" 2>&1 ||
  { tail -n 60 "$out/configure.log"; exit 1; }
cmake --build "$build" -j "$jobs" ${DQNTRADER_BUILD_TARGET:+--target "$DQNTRADER_BUILD_TARGET"} \
  >"$out/build.log" 2>&1 ||
  { grep -E "error|Error" -A5 "$out/build.log" | head -n 80; exit 1; }
echo "build: $((SECONDS - start)) s" | tee -a "$out/setup.log"

status=0
if want test; then
  # ctest runs the suite with --output-on-failure (the preset); its log holds every failure.
  timeout 420 ctest --test-dir "$build" --output-on-failure >"$out/tests.log" 2>&1 || status=1
  grep -E "tests passed|FAILED|Failure" "$out/tests.log" | head -n 40
fi
if want fused; then
  # The fused learning step against the products path over every width pair its loss kernel is
  # compiled for, depths 1 to 4, dueling on and off, 1, 7 and 64 members (and the plan's host
  # tests); memcheck over the same tests with only the fused kernels instrumented
  # (--kernel-name: their names hold "fused"); racecheck over the test that runs every fused
  # kernel without the products path (racecheck stops at cuBLASLt's kernels, even those it
  # does not instrument).
  timeout 240 $build/tests/dqntrader_tests --gtest_filter='LearningStep.*:FusedPlan.*' \
    >"$out/fused.log" 2>&1 || status=1
  grep -E "fused against products|PASSED|FAILED|Failure" "$out/fused.log" | head -n 20
  timeout 150 compute-sanitizer --tool memcheck --kernel-name kns=fused --error-exitcode 9 \
    $build/tests/dqntrader_tests --gtest_filter='LearningStep.*' >"$out/fused-memcheck.log" 2>&1
  echo "memcheck fused exit $?"
  grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/fused-memcheck.log" | tail -n 3
  timeout 150 compute-sanitizer --tool racecheck --kernel-name kns=fused --error-exitcode 9 \
    $build/tests/dqntrader_tests --gtest_filter='LearningStep.TheFusedUpdate*' \
    >"$out/fused-racecheck.log" 2>&1
  echo "racecheck fused exit $?"
  grep -E "RACECHECK SUMMARY|PASSED|FAILED" "$out/fused-racecheck.log" | tail -n 3
fi
if want decisions; then
  # What a run reports is what its exported policy does: a run trained here (bf16 learning),
  # then on its 2,000-bar test window the positions of its evaluation, act, the ONNX model
  # (onnxruntime, OpenCV) and the reference reader, bar by bar (bench/decision_agreement.py).
  timeout 300 python3 bench/decision_agreement.py --dqntrader "$build/dqntrader" \
    --work "$runs/decisions" 2>&1 | tee "$out/decisions.json"
fi
if want module; then
  # The Python module built against the CUDA Kokkos, its pytest suite run here.
  PYTHONPATH="$root/$build/python" DQNTRADER_CLI="$root/$build/dqntrader" timeout 300 python3 -m pytest -q \
    -p no:cacheprovider tests/python >"$out/module.log" 2>&1
  echo "module pytest exit $?"; tail -n 3 "$out/module.log"
fi
if want export; then
  timeout 200 $build/tests/dqntrader_tests --gtest_filter='Export.*:Act.*' >"$out/export.log" 2>&1
  echo "export tests exit $?"; grep -E "PASSED|FAILED|Failure" "$out/export.log" | head -n 20
fi
if want gemm; then
  $build/bench/dqntrader_bench_gemm --benchmark_min_time=0.2 \
    --benchmark_out="$out/bench_gemm.json" --benchmark_out_format=json >"$out/bench_gemm.txt" 2>&1
  grep "gemm/" "$out/bench_gemm.txt"
fi
if want eval; then
  $build/bench/dqntrader_bench_eval --benchmark_filter='EVAL-1M' --benchmark_min_time=1 \
    --benchmark_repetitions=3 --benchmark_out="$out/bench_eval.json" --benchmark_out_format=json \
    >"$out/bench_eval.txt" 2>&1
  grep "eval/" "$out/bench_eval.txt"
fi
if want eval-peer; then
  for k in 1 64; do
    PYTHONUNBUFFERED=1 python3 bench/peers/eval_peer.py --bars 1000000 --hidden 512,512,512 --policies $k \
      --repeats $((k == 1 ? 10 : 2)) 2>&1 | tee -a "$out/eval_peer.jsonl"
  done
fi
if want train; then
  $build/bench/dqntrader_bench_train --benchmark_filter='train/EPOCH/' \
    --benchmark_out="$out/bench_train.json" --benchmark_out_format=json >"$out/bench_train.txt" 2>&1
  grep "train/" "$out/bench_train.txt"
fi
if want train-peer; then
  for mode in "" "--graphs"; do
    PYTHONUNBUFFERED=1 python3 bench/peers/train_peer.py --steps 500 $mode 2>&1 | tee -a "$out/train_peer.jsonl"
  done
fi
if want pop; then
  # POP-K: populations of K = 1 ... 64 on the EPOCH network and on the train defaults' network
  # (POP_FILTER, a regular expression, picks rows).
  timeout 300 $build/bench/dqntrader_bench_train --benchmark_filter="${POP_FILTER:-train/POP-K/}" \
    --benchmark_out="$out/bench_pop.json" --benchmark_out_format=json >"$out/bench_pop.txt" 2>&1
  grep "train/" "$out/bench_pop.txt"
fi
if want pop-peer; then
  # The same populations in PyTorch (torch.func vmap, fused Adam, one CUDA graph a step).
  PYTHONUNBUFFERED=1 python3 bench/peers/population_peer.py --graphs 2>&1 | tee -a "$out/pop_peer.jsonl"
  PYTHONUNBUFFERED=1 python3 bench/peers/population_peer.py --graphs --hidden 128,128 --features 21 \
    --batch 256 --envs 64 2>&1 | tee -a "$out/pop_peer.jsonl"
fi
if want defaults; then
  # The main job's training run (the train defaults, seed 1) recorded (--graph-steps auto, the
  # default) and launched step by step (0): epoch times, and the two runs' records compared.
  dqn=$build/dqntrader
  for graphs in auto 0; do
    /usr/bin/time -f "wall %e s" "$dqn" train --seed 1 --graph-steps $graphs \
      --out "$runs/defaults-$graphs" >"$out/defaults-$graphs.log" 2>&1 ||
      { echo "defaults: the run with --graph-steps $graphs failed"; tail -n 5 "$out/defaults-$graphs.log"; status=1; continue; }
    tail -n 1 "$out/defaults-$graphs.log"
    python3 -c 'import json,sys; t=[json.loads(l) for l in open(sys.argv[1])]; print(sys.argv[2], "epoch train s:", " ".join("%.4f" % r["train_seconds"] for r in t), "validation s:", " ".join("%.4f" % r["validation_seconds"] for r in t))' \
      "$runs/defaults-$graphs/timings.jsonl" "$graphs" | tee -a "$out/defaults.txt"
  done
  if [ -s "$runs/defaults-auto/metrics.jsonl" ] && [ -s "$runs/defaults-0/metrics.jsonl" ]; then
    cmp "$runs/defaults-auto/metrics.jsonl" "$runs/defaults-0/metrics.jsonl" &&
      echo "metrics.jsonl recorded and eager: identical" | tee -a "$out/defaults.txt"
  fi
fi
if want sanitizer; then
  # memcheck over every test that runs device code in this process (the learning runs, the
  # command-line tests and the kill test start other processes or take too long under it).
  timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 $build/tests/dqntrader_tests \
    --gtest_filter='BuildConfig*:Bf16*:Gemm*:Modes/*:Precisions/*:PositionScan*:BacktestEvaluator*:Metrics*:BuiltinPolicies*:Features*:Dueling/*:Adam*:Mlp*:TdLoss*:Replay*:Vaccine*:Environments*:TrainingGuard*:TrainingRun*:LearningStep*' \
    >"$out/memcheck.log" 2>&1
  echo "memcheck exit $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/memcheck.log" | tail -n 5
fi
if want racecheck; then
  # racecheck over the evaluator's scans on small inputs (the suite's scan tests do not finish
  # under it): a built-in policy's backtest (the metrics scans) and a one-epoch training run
  # (its validation: Q-values, the position scan, the metrics scans); then the TD loss oracle.
  dqn=$build/dqntrader
  "$dqn" synth --bars 2000 --seed 3 --out "$out/racecheck.csv" >/dev/null
  timeout 40 compute-sanitizer --tool racecheck --error-exitcode 9 "$dqn" backtest \
    --data "$out/racecheck.csv" --policy sign-of-ofi >"$out/racecheck-backtest.log" 2>&1
  echo "racecheck backtest exit $?"; grep -E "RACECHECK SUMMARY" "$out/racecheck-backtest.log"
  timeout 70 compute-sanitizer --tool racecheck --error-exitcode 9 "$dqn" train \
    --synth-bars 1200 --epochs 1 --steps-per-epoch 2 --learning-starts 64 --hidden 8 \
    --probe-interval 0 --out "$runs/racecheck-run" >"$out/racecheck-train.log" 2>&1
  echo "racecheck train exit $?"; grep -E "RACECHECK SUMMARY" "$out/racecheck-train.log"
  # The fused learning step's kernels on the defaults' network.
  timeout 70 compute-sanitizer --tool racecheck --error-exitcode 9 "$dqn" train \
    --synth-bars 1200 --epochs 1 --steps-per-epoch 2 --learning-starts 64 --learning-path fused \
    --probe-interval 0 --out "$runs/racecheck-fused" >"$out/racecheck-fused.log" 2>&1
  echo "racecheck fused exit $?"; grep -E "RACECHECK SUMMARY" "$out/racecheck-fused.log"
  # The TD loss's teams at both sample counts (the oracle's batches of 203 and 8,203 samples).
  timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 $build/tests/dqntrader_tests \
    --gtest_filter='*TdLossOracle*' >"$out/racecheck-td-loss.log" 2>&1
  echo "racecheck td loss exit $?"; grep -E "RACECHECK SUMMARY" "$out/racecheck-td-loss.log"
fi
if want detail; then
  # One training step's kernels (at the EPOCH shape, after the first 1,500 kernels) with Nsight
  # Compute's throughput, launch, occupancy, memory and warp-state sections: why a kernel of
  # ours takes the time the profile step shows (what its warps wait on). DETAIL_SHAPE=default
  # takes a step of a sweep of 64 members of the train defaults' network instead, and
  # DETAIL_SHAPE=pop one of 16 members at the EPOCH shape (as pop-profile).
  sections=(--section SpeedOfLight --section LaunchStats --section Occupancy
    --section WarpStateStats --section MemoryWorkloadAnalysis --print-kernel-base function)
  if [ "${DETAIL_SHAPE:-EPOCH}" != EPOCH ]; then
    if [ "$DETAIL_SHAPE" = default ]; then
      shape=(--seeds 1-64 --population 64)
    else
      shape=(--seeds 1-16 --population 16 --hidden 512,512,512 --batch-size 1024
        --environments 256 --return-window 56 --learning-starts 1024 --target-update 1000)
    fi
    "$build/dqntrader" synth --bars 40000 --seed 1 --out "$runs/detail.dqnbars" >/dev/null
    timeout 200 ncu --clock-control none --cache-control none "${sections[@]}" \
      --launch-skip 1500 --launch-count 24 $build/dqntrader sweep "${shape[@]}" \
      --data "$runs/detail.dqnbars" --steps-per-epoch 300 --epochs 1 --out "$runs/detail-run" \
      >"$out/detail.txt" 2>"$out/detail.err"
  else
    timeout 200 ncu --clock-control none --cache-control none "${sections[@]}" \
      --launch-skip 1500 --launch-count 24 $build/dqntrader train \
      --synth-bars 40000 --hidden 512,512,512 --batch-size 1024 --environments 256 \
      --return-window 56 --learning-starts 1024 --target-update 1000 --steps-per-epoch 300 \
      --epochs 1 --out "$runs/detail-run" >"$out/detail.txt" 2>"$out/detail.err"
  fi
  echo "detail exit $?"
fi
if want compare; then
  # dqntrader and the PyTorch peers side by side, three runs each, one table.
  timeout 300 python3 bench/compare.py --build "$build" --runs 3 2>&1 | tee "$out/compare.md"
fi
if want profile; then
  # Every kernel of about 60 training steps at the EPOCH shape (past the first 1,500 kernels,
  # before the epoch's validation), each timed alone by Nsight Compute: which kernels a step
  # is made of and what each costs (bench/profile_table.py makes the table).
  dqn=$build/dqntrader
  timeout 300 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
    --print-kernel-base demangled --csv --launch-skip 1500 --launch-count 1000 "$dqn" train \
    --synth-bars 40000 --hidden 512,512,512 --batch-size 1024 --environments 256 \
    --return-window 56 --learning-starts 1024 --target-update 1000 --steps-per-epoch 300 \
    --epochs 1 --out "$runs/profile-run" >"$out/profile.csv" 2>"$out/profile.err"
  echo "profile exit $?"
  python3 bench/profile_table.py "$out/profile.csv" | tee "$out/profile.md"
fi
if want pop-profile; then
  # As profile, for a population of 16 members at the EPOCH shape (dqntrader sweep over 16
  # seeds): which kernels grow with the members. POP_PROFILE_SHAPE=default profiles
  # POP_PROFILE_MEMBERS (64) members of the train defaults' network instead, on the learning
  # path POP_PROFILE_PATH (products).
  dqn=$build/dqntrader
  "$dqn" synth --bars 40000 --seed 1 --out "$runs/pop-profile.dqnbars" >/dev/null
  if [ "${POP_PROFILE_SHAPE:-EPOCH}" = default ]; then
    members=${POP_PROFILE_MEMBERS:-64}
    shape=(--seeds "1-$members" --population "$members"
      --learning-path "${POP_PROFILE_PATH:-products}")
  else
    shape=(--seeds 1-16 --population 16 --hidden 512,512,512 --batch-size 1024
      --environments 256 --return-window 56 --learning-starts 1024 --target-update 1000)
  fi
  timeout 300 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
    --print-kernel-base demangled --csv --launch-skip 1500 --launch-count 600 "$dqn" sweep \
    "${shape[@]}" --data "$runs/pop-profile.dqnbars" --steps-per-epoch 300 --epochs 1 \
    --out "$runs/pop-profile-run" >"$out/pop-profile.csv" 2>"$out/pop-profile.err"
  echo "pop-profile exit $?"
  python3 bench/profile_table.py "$out/pop-profile.csv" | tee "$out/pop-profile.md"
fi
if want stalls; then
  # Where the fused learning step's first kernel waits: one launch (after 200 of it) of a
  # population of STALLS_MEMBERS (1) members of the train defaults' network under Nsight
  # Compute's full set, its warp-state samples by stall reason and by instruction
  # (bench/stall_table.py); the SASS page with the samples in stalls.csv.
  members=${STALLS_MEMBERS:-1}
  "$build/dqntrader" synth --bars 40000 --seed 1 --out "$runs/stalls.dqnbars" >/dev/null
  timeout 200 ncu --clock-control none -k regex:loss_kernel --launch-skip 200 --launch-count 1 \
    --set full --import-source yes -o "$runs/stalls" "$build/dqntrader" sweep \
    --seeds "1-$members" --population "$members" --learning-path fused \
    --data "$runs/stalls.dqnbars" --steps-per-epoch 300 --epochs 1 --out "$runs/stalls-run" \
    >"$out/stalls.log" 2>&1
  echo "stalls exit $?"
  ncu -i "$runs/stalls.ncu-rep" --page source --csv --print-source sass >"$out/stalls.csv" \
    2>>"$out/stalls.log"
  python3 bench/stall_table.py "$out/stalls.csv" | tee "$out/stalls.md"
fi
if want selection; then
  # How much of a sweep's winner is luck: 64 members (16 seeds x 4 learning rates, 8 epochs of
  # the train defaults) on 250,000 bars of the built-in market (the last 50,000 the test
  # window) with its planted signal at 0.3 (the default), 0.1, 0.05 and 0 (no signal): the
  # winner's validation and test Sharpe, the medians, the statistics, and their share of the
  # sweep's time (selection.jsonl).
  dqn=$build/dqntrader
  for signal in ${SELECTION_SIGNALS:-0.3 0.1 0.05 0}; do
    "$dqn" synth --bars 250000 --seed 1 --ofi-signal "$signal" \
      --out "$runs/market-$signal.dqnbars" >/dev/null
    begin=$(date +%s.%N)
    timeout 240 "$dqn" sweep --data "$runs/market-$signal.dqnbars" --out "$runs/luck-$signal" \
      --seeds 1-16 --set learning-rate=1e-4,3e-4,1e-3,3e-3 --epochs 8 \
      >"$out/selection-$signal.log" 2>&1 ||
      { echo "selection: the sweep with signal $signal failed"; tail -n 5 "$out/selection-$signal.log"; status=1; continue; }
    python3 bench/selection_summary.py "$runs/luck-$signal" --signal "$signal" --begin "$begin" \
      --log "$out/selection-$signal.log" | tee -a "$out/selection.jsonl"
  done
fi
if want sweep; then
  # Where a sweep's time goes: 1,024 seeds of the defaults, 2 epochs, on 200,000 bars of the
  # built-in market, twice (each population's phases, the sweep's end; docs/BENCHMARKS.md).
  for round in 1 2; do
    timeout 240 python3 bench/sweep_phases.py --dqntrader "$build/dqntrader" --work "$runs/sweep" \
      --seeds 1-1024 >"$out/sweep-$round.json" || { echo "sweep: round $round failed"; status=1; }
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print("sweep/1024-seeds", d.get("wall_seconds"), "s; least inside", d.get("least_inside_share"))' "$out/sweep-$round.json"
  done
fi
if want schedule; then
  # Schedules at equal budget on the built-in market (500,000 bars, the last 100,000 the test
  # window): the grid of 32 members, PBT on the same 32, successive halving from 64 (every 2
  # epochs); 8 epochs of the train defaults (schedule.jsonl, schedule.md).
  dqn=$build/dqntrader
  "$dqn" synth --bars 500000 --seed 1 --out "$runs/schedule-market.dqnbars" >/dev/null
  timeout 420 python3 bench/schedule_study.py --dqntrader "$dqn" \
    --data "$runs/schedule-market.dqnbars" --work "$runs/schedules" --epochs 8 \
    >"$out/schedule.md" 2>"$out/schedule.err" || { echo "schedule: the study failed"; status=1; }
  cat "$out/schedule.md" "$out/schedule.err"
fi
if want mpi; then
  # One sweep (16 members of the train defaults' network in populations of 4, 2 epochs of
  # 1,000 steps) on 1 rank and on 2 ranks sharing the GPU: wall time, agent-steps/s, and rank
  # 0's hand-out and records against the populations' time (its last log line).
  dqn=$build/dqntrader
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  "$dqn" synth --bars 100000 --seed 1 --out "$runs/mpi-bars.dqnbars" >/dev/null
  for ranks in 1 2; do
    begin=$(date +%s.%N)
    timeout 200 mpirun --oversubscribe -np $ranks "$dqn" sweep --data "$runs/mpi-bars.dqnbars" \
      --out "$runs/mpi-$ranks" --epochs 2 --steps-per-epoch 1000 --seeds 1-8 \
      --set learning-rate=1e-4,1e-3 --population 4 >"$out/mpi-$ranks.log" 2>&1 ||
      { echo "mpi: the sweep on $ranks ranks failed"; tail -n 5 "$out/mpi-$ranks.log"; status=1; continue; }
    python3 -c 'import sys, time; w = time.time() - float(sys.argv[2])
print("mpi ranks %s wall %.2f s agent-steps/s %.0f" % (sys.argv[1], w, 16 * 2000 / w))' \
      "$ranks" "$begin" | tee -a "$out/mpi.txt"
    grep "ranks;" "$out/mpi-$ranks.log" | tee -a "$out/mpi.txt"
  done
  if [ -s "$runs/mpi-1/leaderboard.csv" ] && [ -s "$runs/mpi-2/leaderboard.csv" ]; then
    cmp "$runs/mpi-1/leaderboard.csv" "$runs/mpi-2/leaderboard.csv" &&
      echo "leaderboard.csv of 1 and 2 ranks: identical" | tee -a "$out/mpi.txt"
  fi
fi
exit $status
