#!/usr/bin/env python3
"""Per-kernel table of an Nsight Compute CSV (gpu__time_duration.sum per kernel), as
scripts/device/cuda-suite.sh profile writes it: launches, mean time, and per training step
(steps counted as launches of the kernel that takes the TD loss, one per learning step: the
products path's TdLoss kernel or the fused path's loss_kernel).

    bench/profile_table.py profile.csv
"""
import collections
import csv
import re
import sys


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(sys.argv[1], newline="") as f:
        rows = [r for r in csv.reader(f) if len(r) > 10]
    if not rows:
        print(f"{sys.argv[1]}: no kernel rows", file=sys.stderr)
        return 1
    header = rows[0]
    name_at, value_at = header.index("Kernel Name"), header.index("Metric Value")
    grid_at, block_at = header.index("Grid Size"), header.index("Block Size")
    count = collections.Counter()
    total = collections.defaultdict(float)
    shape = {}
    for r in rows[1:]:
        name = r[name_at]
        for prefix in ("void Kokkos::cuda_parallel_launch_local_memory<Kokkos::",
                       "void Kokkos::cuda_parallel_launch_constant_memory<Kokkos::"):
            name = name.replace(prefix, "")
        count[name] += 1
        total[name] += float(r[value_at].replace(",", "")) / 1000.0  # ns -> us
        shape[name] = f"{r[grid_at]} x {r[block_at]}"
    steps = sum(c for n, c in count.items() if "TdLoss" in n or re.search(r"fused::.*loss_kernel", n))
    if steps == 0:
        print(f"{sys.argv[1]}: no TD-loss launches, no training steps to count", file=sys.stderr)
        return 1
    print(f"{steps} training steps, {sum(count.values())} kernels: "
          f"{sum(count.values()) / steps:.1f} kernels and {sum(total.values()) / steps:.1f} us a step")
    print()
    print("| kernel | grid x block | per step | mean (us) | us per step |")
    print("|---|---|---|---|---|")
    # Kernels whose names begin alike (the lambdas of one function) are told apart by the
    # lambdas' instance numbers, which follow the first 90 characters.
    def shown(name: str) -> str:
        instances = re.findall(r"\(instance \d+\)", name)
        return name[:90] + ("".join(f" {i}" for i in instances) if instances else "")

    for name in sorted(count, key=lambda n: -total[n]):
        print(f"| `{shown(name)}` | {shape[name]} | {count[name] / steps:.2f} | "
              f"{total[name] / count[name]:.2f} | {total[name] / steps:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
