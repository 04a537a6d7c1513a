#!/usr/bin/env python3
"""Where a kernel's warps wait: Nsight Compute's warp-state samples of one kernel (the SASS
source page as CSV, as scripts/device/cuda-suite.sh stalls writes it), summed by stall reason
and by instruction.

    bench/stall_table.py stalls.csv
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
        rows = list(csv.reader(f))
    at = next((i for i, r in enumerate(rows) if "Address" in r and "Source" in r), None)
    if at is None:
        print(f"{sys.argv[1]}: no SASS source table (Address, Source)", file=sys.stderr)
        return 1
    header, body = rows[at], [r for r in rows[at + 1:] if len(r) == len(rows[at])]
    reasons = [(i, n) for i, n in enumerate(header)
               if n.startswith("stall_") and "Not Issued" not in n]
    source = header.index("Source")

    def number(text: str) -> int:
        text = text.replace(",", "")
        return int(text) if text.isdigit() else 0

    by_reason = collections.Counter()
    by_opcode = collections.Counter()
    for r in body:
        opcode = re.sub(r"^@!?U?P\w+\s+", "", r[source].strip()).split(" ")[0].split(".")[0]
        for i, name in reasons:
            by_reason[name[len("stall_"):]] += number(r[i])
            by_opcode[opcode] += number(r[i])
    total = sum(by_reason.values())
    if total == 0:
        print(f"{sys.argv[1]}: no warp-state samples", file=sys.stderr)
        return 1
    print(f"{total} samples over {len(body)} instructions")
    print()
    print("| stall reason | samples | share |")
    print("|---|---|---|")
    for name, count in by_reason.most_common():
        if count:
            print(f"| {name} | {count} | {100.0 * count / total:.1f}% |")
    print()
    print("| instruction | samples | share |")
    print("|---|---|---|")
    for name, count in by_opcode.most_common(12):
        print(f"| {name} | {count} | {100.0 * count / total:.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
