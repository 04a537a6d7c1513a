#!/usr/bin/env python3
"""Float64 oracle of the selection statistics of docs/METRICS.md ("Selection statistics").

The tests' reference implementation, in plain numpy, of

- the per-bar Sharpe ratio,
- the expected maximum Sharpe ratio of N skill-less trials and the deflated Sharpe ratio
  (D. H. Bailey and M. López de Prado (2014), "The Deflated Sharpe Ratio: Correcting for
  Selection Bias, Backtest Overfitting and Non-Normality", Journal of Portfolio Management
  40(5)),
- the probability of backtest overfitting by combinatorially symmetric cross-validation
  (D. H. Bailey, J. M. Borwein, M. López de Prado and Q. J. Zhu (2017), "The Probability of
  Backtest Overfitting", Journal of Computational Finance 20(4)).

Usage:
    selection_statistics.py MATRIX.csv --blocks S --winner J [--columns A,B,... | --suffix SFX]
    selection_statistics.py --self-test

MATRIX.csv has a header line of column names and one row of comma-separated numbers per bar.
A first column named "timestamp" or "bar" is ignored. By default every other column is a
candidate; --columns names the candidates (in that order), --suffix takes the columns whose
name ends with the suffix (in file order), e.g. --suffix :return for the CSV of the backtest
command. The result is one JSON object on stdout; NaN (and any other non-finite number) is
written as null.
"""

import argparse
import csv
import itertools
import json
import math
import sys
import time
from statistics import NormalDist

import numpy as np

EULER_GAMMA = 0.5772156649015329
_NORMAL = NormalDist()


# ----------------------------------------------------------------------------------------
# Definitions
# ----------------------------------------------------------------------------------------

def sharpe(returns, axis=0):
    """Per-bar Sharpe ratio mean(r) / std(r, ddof=1) along `axis`; 0 where the returns do not
    vary (all equal: their std computed in floating point may be rounding, not 0).

    Not annualised and not net of a risk-free rate, as used by Bailey and López de Prado
    (2014), "The Deflated Sharpe Ratio", Journal of Portfolio Management 40(5), and by
    Bailey, Borwein, López de Prado and Zhu (2017), "The Probability of Backtest
    Overfitting", Journal of Computational Finance 20(4).
    Returns a float for a 1-d input, an array of the remaining axes otherwise.
    """
    r = np.asarray(returns, dtype=np.float64)
    mean = r.mean(axis=axis)
    sd = r.std(axis=axis, ddof=1)
    constant = np.ptp(r, axis=axis) == 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        sr = np.where(constant | (sd == 0.0), 0.0, mean / sd)
    return float(sr) if np.ndim(sr) == 0 else sr


def skewness_kurtosis(returns):
    """Skewness g3 = m3 / m2^1.5 and kurtosis g4 = m4 / m2^2 (not excess: 3 for a normal).

    mk = mean((r - mean(r))^k), the population (divide-by-T) central moments, as in the
    deflated Sharpe ratio of Bailey and López de Prado (2014), "The Deflated Sharpe Ratio",
    Journal of Portfolio Management 40(5). NaN for returns that do not vary.
    """
    r = np.asarray(returns, dtype=np.float64)
    d = r - r.mean()
    m2 = np.mean(d ** 2)
    m3 = np.mean(d ** 3)
    m4 = np.mean(d ** 4)
    if not m2 > 0.0 or np.ptp(r) == 0.0:
        return math.nan, math.nan
    return float(m3 / m2 ** 1.5), float(m4 / m2 ** 2)


def expected_max_sharpe(variance, n_trials):
    """Expected maximum Sharpe ratio of `n_trials` independent trials of true Sharpe ratio 0.

    SR0 = sqrt(V) * ((1 - g) * Phi^-1(1 - 1/N) + g * Phi^-1(1 - 1/(N e))), with V the
    variance across the trials of their estimated Sharpe ratios, g the Euler-Mascheroni
    constant and Phi^-1 the standard normal quantile: D. H. Bailey and M. López de Prado
    (2014), "The Deflated Sharpe Ratio", Journal of Portfolio Management 40(5).
    NaN for fewer than 2 trials or a variance that is NaN or negative.
    """
    n = int(n_trials)
    v = float(variance)
    if n < 2 or not v >= 0.0:
        return math.nan
    z1 = _NORMAL.inv_cdf(1.0 - 1.0 / n)
    z2 = _NORMAL.inv_cdf(1.0 - 1.0 / (n * math.e))
    return math.sqrt(v) * ((1.0 - EULER_GAMMA) * z1 + EULER_GAMMA * z2)


def deflated_sharpe(sr_star, sr0, n_returns, skewness, kurtosis):
    """Deflated Sharpe ratio of a selected strategy.

    DSR = Phi((SR* - SR0) * sqrt(T - 1) / sqrt(1 - g3 SR* + (g4 - 1)/4 SR*^2)), with SR* the
    selected strategy's per-bar Sharpe ratio over its T returns, g3 and g4 their skewness and
    kurtosis (not excess), SR0 the expected maximum Sharpe ratio of the trials
    (expected_max_sharpe): D. H. Bailey and M. López de Prado (2014), "The Deflated Sharpe
    Ratio", Journal of Portfolio Management 40(5). NaN when the expression under the square
    root is not > 0 (or any input is NaN).
    """
    sr = float(sr_star)
    under_root = 1.0 - float(skewness) * sr + (float(kurtosis) - 1.0) / 4.0 * sr * sr
    if not under_root > 0.0 or math.isnan(sr0) or n_returns < 2:
        return math.nan
    z = (sr - float(sr0)) * math.sqrt(n_returns - 1) / math.sqrt(under_root)
    if math.isnan(z):
        return math.nan
    return _NORMAL.cdf(z)


def cscv_splits(n_blocks):
    """The C(S, S/2) in-sample block sets J, in itertools.combinations order."""
    return list(itertools.combinations(range(n_blocks), n_blocks // 2))


def cscv(returns, n_blocks, batch_bytes=1 << 20):
    """Probability of backtest overfitting by combinatorially symmetric cross-validation.

    D. H. Bailey, J. M. Borwein, M. López de Prado and Q. J. Zhu (2017), "The Probability of
    Backtest Overfitting", Journal of Computational Finance 20(4).

    `returns` is the T x N matrix (rows = bars in time order, columns = candidates). The first
    T mod S rows are dropped and the rest cut into S consecutive blocks of L = T // S rows.
    For each choice J of S/2 blocks (itertools.combinations order) the in-sample rows are the
    rows of the blocks in J, concatenated, the out-of-sample rows those of the other blocks;
    n* is the candidate with the largest in-sample Sharpe ratio (lowest index among ties),
    rank its out-of-sample Sharpe ratio's rank among the N (1 = worst, ties averaged),
    w = rank / (N + 1) and logit = ln(w / (1 - w)).

    Returns a dict: blocks, dropped, splits, logits, pbo (share of logits <= 0),
    probability_of_loss (share of splits with n*'s out-of-sample Sharpe ratio < 0), slope
    (OLS slope of n*'s out-of-sample on its in-sample Sharpe ratio), and per split:
    selected (n*), is_sharpe, oos_sharpe (n*'s), rank.

    The out-of-sample rows of J are the in-sample rows of its complement, in the same order,
    so the Sharpe ratios of every half are computed once: sharpe(R[rows], axis=0) for each
    J, a few J at a time (R[idx] with idx of shape (k, rows), reduced along axis 1).
    """
    r = np.asarray(returns, dtype=np.float64)
    if r.ndim != 2:
        raise ValueError("returns must be a T x N matrix")
    t, n = r.shape
    s = int(n_blocks)
    if s < 2 or s % 2 != 0:
        raise ValueError("the number of blocks must be even and >= 2")
    length = t // s
    if length * (s // 2) < 2:
        raise ValueError("too few rows for %d blocks" % s)
    dropped = t - length * s
    block_rows = dropped + np.arange(s * length).reshape(s, length)   # (S, L) row numbers

    splits = cscv_splits(s)
    c = len(splits)
    position = {split: i for i, split in enumerate(splits)}
    complement = np.array([position[tuple(b for b in range(s) if b not in split)]
                           for split in splits])

    # half_sharpes[i, j]: Sharpe ratio of candidate j over the rows of the blocks of split i.
    half_rows = length * (s // 2)
    half_sharpes = np.empty((c, n))
    batch = max(1, batch_bytes // (half_rows * max(n, 1) * 8))
    for start in range(0, c, batch):
        stop = min(c, start + batch)
        rows = block_rows[np.array(splits[start:stop])].reshape(stop - start, half_rows)
        half_sharpes[start:stop] = sharpe(r[rows], axis=1)

    is_all = half_sharpes                      # (C, N) in-sample
    oos_all = half_sharpes[complement]         # (C, N) out-of-sample
    selected = np.argmax(is_all, axis=1)       # first maximum: lowest index among ties
    every = np.arange(c)
    is_sr = is_all[every, selected]
    oos_sr = oos_all[every, selected]
    below = np.sum(oos_all < oos_sr[:, None], axis=1)
    equal = np.sum(oos_all == oos_sr[:, None], axis=1)   # n* included
    rank = below + (equal + 1) / 2.0

    w = rank / (n + 1)
    logits = np.log(w / (1.0 - w))

    x, y = is_sr, oos_sr
    denominator = c * np.sum(x * x) - np.sum(x) ** 2
    numerator = c * np.sum(x * y) - np.sum(x) * np.sum(y)
    slope = float(numerator / denominator) if denominator != 0.0 else math.nan

    return {
        "blocks": s,
        "dropped": int(dropped),
        "splits": c,
        "logits": logits,
        "pbo": float(np.mean(logits <= 0.0)),
        "probability_of_loss": float(np.mean(oos_sr < 0.0)),
        "slope": slope,
        "selected": selected,
        "is_sharpe": is_sr,
        "oos_sharpe": oos_sr,
        "rank": rank,
    }


def selection_statistics(returns, winner, n_blocks):
    """All the statistics of docs/METRICS.md "Selection statistics" as one dict.

    Keys as written by the command line: trials, returns, winner, sharpes, sharpe_variance,
    skewness, kurtosis, expected_max_sharpe, deflated_sharpe, blocks, dropped, splits,
    logits, pbo, probability_of_loss, slope. References: Bailey and López de Prado (2014),
    "The Deflated Sharpe Ratio", Journal of Portfolio Management 40(5); Bailey, Borwein,
    López de Prado and Zhu (2017), "The Probability of Backtest Overfitting", Journal of
    Computational Finance 20(4).
    """
    r = np.asarray(returns, dtype=np.float64)
    t, n = r.shape
    if not 0 <= winner < n:
        raise ValueError("winner %d is not a column index (N = %d)" % (winner, n))
    sharpes = sharpe(r, axis=0)
    variance = float(np.var(sharpes, ddof=1)) if n >= 2 else math.nan
    sr0 = expected_max_sharpe(variance, n)
    g3, g4 = skewness_kurtosis(r[:, winner])
    dsr = deflated_sharpe(sharpes[winner], sr0, t, g3, g4)
    pbo = cscv(r, n_blocks)
    return {
        "trials": n,
        "returns": t,
        "winner": int(winner),
        "sharpes": [float(v) for v in sharpes],
        "sharpe_variance": variance,
        "skewness": g3,
        "kurtosis": g4,
        "expected_max_sharpe": sr0,
        "deflated_sharpe": dsr,
        "blocks": pbo["blocks"],
        "dropped": pbo["dropped"],
        "splits": pbo["splits"],
        "logits": [float(v) for v in pbo["logits"]],
        "pbo": pbo["pbo"],
        "probability_of_loss": pbo["probability_of_loss"],
        "slope": pbo["slope"],
    }


# ----------------------------------------------------------------------------------------
# CSV input and JSON output
# ----------------------------------------------------------------------------------------

def read_matrix(path, columns=None, suffix=None):
    """Read the candidates' columns of a CSV file: returns (names, T x N float64 matrix)."""
    with open(path, newline="") as f:
        rows = [row for row in csv.reader(f) if row and any(cell.strip() for cell in row)]
    if not rows:
        raise ValueError("%s: empty file" % path)
    header = [name.strip() for name in rows[0]]
    if columns is not None:
        names = columns
        missing = [name for name in names if name not in header]
        if missing:
            raise ValueError("%s: no column named %s" % (path, ", ".join(missing)))
        index = [header.index(name) for name in names]
    elif suffix is not None:
        index = [i for i, name in enumerate(header) if name.endswith(suffix)]
        names = [header[i] for i in index]
    else:
        first = 1 if header and header[0].lower() in ("timestamp", "bar") else 0
        index = list(range(first, len(header)))
        names = header[first:]
    if not index:
        raise ValueError("%s: no candidate columns" % path)
    values = []
    for line, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise ValueError("%s:%d: %d fields, header has %d" % (path, line, len(row), len(header)))
        values.append([float(row[i]) for i in index])
    return names, np.array(values, dtype=np.float64).reshape(len(values), len(index))


def _json_ready(value):
    """Non-finite floats become None (JSON null); numpy scalars become Python numbers."""
    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    return value


# ----------------------------------------------------------------------------------------
# Self-test
# ----------------------------------------------------------------------------------------

SIGMA = 0.01  # per-bar standard deviation of the simulated returns (the statistics are scale-free)


def _noise(seed, t, n):
    return np.random.default_rng(seed).normal(0.0, SIGMA, size=(t, n))


def _edge(seed, t, n_noise):
    """Column 0 with mean 0.2 * its std per bar, then n_noise columns of mean 0."""
    r = _noise(seed, t, 1 + n_noise)
    r[:, 0] += 0.2 * SIGMA
    return r


def _dsr_of(r, winner):
    sharpes = sharpe(r, axis=0)
    sr0 = expected_max_sharpe(np.var(sharpes, ddof=1), r.shape[1])
    g3, g4 = skewness_kurtosis(r[:, winner])
    return deflated_sharpe(sharpes[winner], sr0, r.shape[0], g3, g4)


def _plain_cscv_split(r, n_blocks, split):
    """One CSCV split written out directly, for check e: (n*, IS SR, OOS SR, rank, logit)."""
    t, n = r.shape
    length = t // n_blocks
    dropped = t % n_blocks
    blocks = [np.arange(dropped + b * length, dropped + (b + 1) * length) for b in range(n_blocks)]
    is_rows = np.concatenate([blocks[b] for b in split])
    oos_rows = np.concatenate([blocks[b] for b in range(n_blocks) if b not in split])
    is_sr = list(sharpe(r[is_rows], axis=0))
    oos_sr = list(sharpe(r[oos_rows], axis=0))
    best = is_sr.index(max(is_sr))
    below = sum(1 for v in oos_sr if v < oos_sr[best])
    equal = sum(1 for v in oos_sr if v == oos_sr[best])
    rank = below + (equal + 1) / 2.0
    w = rank / (n + 1)
    column_by_column = [sharpe(r[is_rows, j]) for j in range(n)]
    return best, is_sr[best], oos_sr[best], rank, math.log(w / (1.0 - w)), column_by_column


def self_test():
    checks = []

    def report(name, ok, measured, band):
        checks.append(ok)
        print("%s %s: %s (required %s)" % ("PASS" if ok else "FAIL", name, measured, band))
        sys.stdout.flush()

    began = time.perf_counter()

    # a. Pure noise: PBO near 0.5.
    pbos = [cscv(_noise(seed, 2000, 16), 16)["pbo"] for seed in range(20)]
    mean_pbo = float(np.mean(pbos))
    report("a. noise N=16 T=2000 S=16, mean PBO over seeds 0..19",
           0.35 <= mean_pbo <= 0.65,
           "mean %.4f (min %.4f, max %.4f)" % (mean_pbo, min(pbos), max(pbos)),
           "[0.35, 0.65]")

    # b. One real edge among noise: PBO near 0.
    pbos = [cscv(_edge(1000 + i, 2000, 15), 16)["pbo"] for i in range(10)]
    report("b. edge 0.2 sd + 15 noise, T=2000 S=16, PBO of seeds 1000..1009",
           all(p <= 0.05 for p in pbos),
           "max %.4f" % max(pbos), "every one <= 0.05")

    # c. Best of pure noise: DSR mostly below 0.95.
    below = 0
    highest = 0.0
    for i in range(100):
        r = _noise(2000 + i, 1000, 32)
        dsr = _dsr_of(r, int(np.argmax(sharpe(r, axis=0))))
        highest = max(highest, dsr)
        below += dsr < 0.95
    report("c. best of 32 noise, T=1000, DSR < 0.95 over seeds 2000..2099",
           below >= 90, "%d of 100 (highest DSR %.4f)" % (below, highest), ">= 90 of 100")

    # d. A strong single edge: DSR above 0.95. T = 2000 rather than 1000: V includes the
    # edge candidate itself, which lifts SR0 to about 0.1, and with T = 1000 about 2.4% of
    # draws give a DSR below 0.95 (seed 3004 of 3000..3009 gives 0.945), so "every one of 10
    # draws" would fail about one run in five whatever the seeds. With T = 2000 the lowest DSR
    # over seeds 3000..3999 is 0.9993.
    dsrs = [_dsr_of(_edge(3000 + i, 2000, 32), 0) for i in range(10)]
    report("d. edge 0.2 sd + 32 noise, T=2000, DSR of column 0 over seeds 3000..3009",
           all(d > 0.95 for d in dsrs), "min %.6f" % min(dsrs), "every one > 0.95")

    # e. Consistency of the pieces: the CSCV loop against each split computed directly.
    r = np.random.default_rng(4000).normal(0.0, SIGMA, size=(200, 5))
    n_blocks = 12  # 200 mod 12 = 8 rows dropped, L = 16, C(12, 6) = 924 splits
    result = cscv(r, n_blocks)
    differ = 0
    logit_error = 0.0
    column_error = 0.0
    pbo_count = 0
    for i, split in enumerate(cscv_splits(n_blocks)):
        best, is_sr, oos_sr, rank, logit, columns = _plain_cscv_split(r, n_blocks, split)
        differ += not (best == result["selected"][i] and is_sr == result["is_sharpe"][i]
                       and oos_sr == result["oos_sharpe"][i] and rank == result["rank"][i])
        logit_error = max(logit_error, abs(logit - result["logits"][i]))
        column_error = max(column_error, abs(columns[best] - is_sr) / abs(is_sr))
        pbo_count += logit <= 0.0
    report("e. 200x5 S=12: CSCV loop vs each split's rows gathered directly "
           "(n*, IS SR, OOS SR, rank exact; logit 1e-12)",
           differ == 0 and logit_error <= 1e-12 and pbo_count / 924.0 == result["pbo"]
           and result["dropped"] == 8 and result["splits"] == 924,
           "%d of %d splits differ, logit error %.1e, dropped %d"
           % (differ, result["splits"], logit_error, result["dropped"]),
           "0 differ, dropped 8")
    report("e. 200x5 S=12: in-sample SR of n* column by column (1-d sums) vs the loop",
           column_error <= 1e-12, "relative error %.1e" % column_error, "<= 1e-12")

    sr0 = [expected_max_sharpe(1.0, n) for n in range(2, 101)]
    increasing = all(b > a for a, b in zip(sr0, sr0[1:]))
    report("e. SR0(V=1, N) for N=2..100 strictly increasing",
           increasing, "SR0(2)=%.6f SR0(100)=%.6f" % (sr0[0], sr0[-1]), "increasing")

    elapsed = time.perf_counter() - began
    print("%d of %d checks passed in %.1f s" % (sum(checks), len(checks), elapsed))
    return 0 if all(checks) else 1


# ----------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------

def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Float64 oracle of the selection statistics of docs/METRICS.md.")
    parser.add_argument("matrix", nargs="?", help="CSV file: header line, one row per bar")
    parser.add_argument("--blocks", type=int, help="number of CSCV blocks S (even)")
    parser.add_argument("--winner", type=int, help="index of the selected candidate")
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument("--columns", help="comma-separated header names of the candidates")
    choice.add_argument("--suffix", help="candidates = columns whose name ends with this")
    parser.add_argument("--self-test", action="store_true", help="run the oracle's own checks")
    args = parser.parse_args(argv)

    if args.self_test:
        return self_test()
    if args.matrix is None or args.blocks is None or args.winner is None:
        parser.error("MATRIX.csv, --blocks and --winner are required (or --self-test)")
    columns = [c.strip() for c in args.columns.split(",")] if args.columns else None
    try:
        _, r = read_matrix(args.matrix, columns=columns, suffix=args.suffix)
        result = selection_statistics(r, args.winner, args.blocks)
    except ValueError as error:
        print("selection_statistics.py: %s" % error, file=sys.stderr)
        return 2
    print(json.dumps(_json_ready(result), allow_nan=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
