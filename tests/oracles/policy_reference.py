#!/usr/bin/env python3
"""Reference reader of .dqnpolicy files and of the decision they encode.

Written from docs/POLICY.md ("The policy file and the decision it encodes") and
docs/FEATURES.md alone, not from dqntrader's code, so that the tests can hold `dqntrader act`,
`dqntrader backtest` and the ONNX export to an independent implementation. It

- reads a policy file: the byte layout of version 1, the XXH64 (seed 0) checksum, the JSON
  metadata, the float32 parameters split into per-layer weights [inputs x outputs] and biases;
- reads a CSV bar file (header row; UTF-8 byte-order mark, CRLF, double-quoted fields and
  empty lines accepted) - only what the decision needs, without the project's validation;
- computes the raw features (double precision, stored as float32) and standardizes them with
  the policy's statistics (double precision, result float32);
- evaluates the network in float32 (ReLU hidden layers, plain or dueling head);
- takes the decisions bar after bar, the position of each decision being the incoming
  position of the next (argmax over the Q-values, ties to the lowest action).

Bars are numbered from 0 in file order (empty lines skipped). The first bar with a decision is
the warm-up W = max(return_window, volatility_window, ofi_window - 1).

Usage:
    policy_reference.py POLICY BARS.csv [--from BAR] [--to BAR] [--position P]
    policy_reference.py POLICY BARS.csv --every-position [--from BAR] [--to BAR]
    policy_reference.py --check POLICY
    policy_reference.py --self-test

Without --from and --to the decision at the latest bar only; --from alone goes to the last
bar, --to alone starts at the warm-up bar W. --position is the incoming position of the first
decision, a value that must be one of the policy's positions (default 0, flat). One JSON
object per line (JSON Lines) per decision: {"bar": t, "q": [...], "action": a,
"position": positions[a]}; q holds the float32 Q-values written as Python floats (exact).
--every-position decides at each bar coming in with each of the policy's positions in turn,
carrying nothing: one line per bar and incoming position, bar by bar, the positions in their
order, {"bar": t, "incoming": i (the position's index), "q": [...], "action": a}.
--check verifies the file and prints one JSON object: the metadata and what follows from it.
--self-test builds policies and bars of its own and checks the reader and the decisions.
Exit status 2 with a message on stderr for a bad file, a missing column, too few bars, a
position not in the policy or a bar outside the data.

Needs Python 3, NumPy and xxhash (Debian: python3-numpy python3-xxhash).
"""

import argparse
import contextlib
import csv
import io
import json
import math
import os
import struct
import sys
import tempfile
import time

import numpy as np
import xxhash

MAGIC = b"DQNPOLCY"
VERSION = 1
HEADER_BYTES = 20  # magic 8 + version 4 + M 8


# ----------------------------------------------------------------------------------------
# The policy file
# ----------------------------------------------------------------------------------------

def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value):
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _reject_constant(name):
    raise ValueError("metadata: %s is not a JSON number" % name)


def _no_duplicate_keys(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError("metadata: duplicated key %r" % key)
        obj[key] = value
    return obj


def layer_shapes(metadata):
    """[(inputs, outputs), ...] of the hidden layers then the head, as docs/POLICY.md lists
    the parameters."""
    net = metadata["network"]
    shapes = []
    inputs = net["features"] + net["positions"]
    for width in net["hidden"]:
        shapes.append((inputs, width))
        inputs = width
    head_outputs = net["actions"] + 1 if net["dueling"] else net["actions"]
    shapes.append((inputs, head_outputs))
    return shapes


def parameter_count(metadata):
    """P = sum over the layers and the head of (inputs x outputs + outputs)."""
    return sum(i * o + o for i, o in layer_shapes(metadata))


def check_metadata(meta):
    """The checks of docs/POLICY.md ("Metadata") plus the types the table gives; raises
    ValueError."""
    if not isinstance(meta, dict):
        raise ValueError("metadata: not a JSON object")
    for key in ("network", "features", "positions"):
        if key not in meta:
            raise ValueError("metadata: no %r" % key)
    net, feat, positions = meta["network"], meta["features"], meta["positions"]
    if not isinstance(net, dict) or not isinstance(feat, dict):
        raise ValueError("metadata: 'network' and 'features' must be objects")
    for key in ("features", "positions", "actions"):
        if not _is_int(net.get(key)) or net[key] < 1:
            raise ValueError("metadata: network.%s must be a positive integer" % key)
    hidden = net.get("hidden")
    if (not isinstance(hidden, list) or len(hidden) < 1
            or not all(_is_int(h) and h >= 1 for h in hidden)):
        raise ValueError("metadata: network.hidden must be a non-empty list of positive "
                         "integers")
    if not isinstance(net.get("dueling"), bool):
        raise ValueError("metadata: network.dueling must be true or false")
    for key, low in (("return_window", 1), ("volatility_window", 2), ("ofi_window", 0)):
        if not _is_int(feat.get(key)) or feat[key] < low:
            raise ValueError("metadata: features.%s must be an integer >= %d" % (key, low))
    extra = feat.get("extra")
    if not isinstance(extra, list) or not all(isinstance(name, str) for name in extra):
        raise ValueError("metadata: features.extra must be a list of strings")
    n_features = feat["return_window"] + 1 + feat["ofi_window"] + len(extra)
    if net["features"] != n_features:
        raise ValueError("metadata: network.features is %d, the features give "
                         "R + 1 + O + extras = %d" % (net["features"], n_features))
    for key in ("mean", "stdev"):
        values = feat.get(key)
        if not isinstance(values, list) or not all(_is_number(v) for v in values):
            raise ValueError("metadata: features.%s must be a list of numbers" % key)
        if len(values) != n_features:
            raise ValueError("metadata: features.%s holds %d numbers, not F = %d"
                             % (key, len(values), n_features))
    # Not among the checks docs/POLICY.md lists, but step 2 divides by it.
    for f, s in enumerate(feat["stdev"]):
        if not s > 0.0:
            raise ValueError("metadata: features.stdev[%d] = %r is not positive" % (f, s))
    if not isinstance(positions, list) or not all(_is_number(p) for p in positions):
        raise ValueError("metadata: positions must be a list of numbers")
    if len(positions) != net["positions"]:
        raise ValueError("metadata: positions holds %d numbers, network.positions is %d"
                         % (len(positions), net["positions"]))
    if net["actions"] != net["positions"]:
        raise ValueError("metadata: network.actions is %d, not the number of positions %d"
                         % (net["actions"], net["positions"]))
    if 0.0 not in positions:
        raise ValueError("metadata: positions holds no 0 (flat)")


def warmup(policy_or_metadata):
    """W = max(R, V, O - 1), the first bar with a decision."""
    meta = policy_or_metadata.get("metadata", policy_or_metadata)
    feat = meta["features"]
    return max(feat["return_window"], feat["volatility_window"], feat["ofi_window"] - 1)


def read_policy(path):
    """Read and verify a .dqnpolicy file (docs/POLICY.md, version 1).

    Returns a dict: metadata (the JSON object), parameters (all P float32 values), layers
    (list of (W, b) of the hidden layers, W float32 [inputs, outputs], b float32 [outputs]),
    head ((W, b) of the head; with dueling, column 0 is V and 1..A the advantages), positions
    (list of floats), checksum (int). Raises ValueError for a file that is not a valid one.
    """
    with open(path, "rb") as f:
        data = f.read()
    return parse_policy(data)


def parse_policy(data):
    """read_policy on the bytes of a file."""
    n = len(data)
    if n < HEADER_BYTES:
        raise ValueError("truncated: %d bytes, the header alone is %d" % (n, HEADER_BYTES))
    if data[0:8] != MAGIC:
        raise ValueError("bad magic %r, expected %r" % (data[0:8], MAGIC))
    (version,) = struct.unpack_from("<I", data, 8)
    if version != VERSION:
        raise ValueError("unknown format version %d (this reader knows %d)"
                         % (version, VERSION))
    (m,) = struct.unpack_from("<Q", data, 12)
    if HEADER_BYTES + m + 8 > n:
        raise ValueError("truncated: the metadata length %d runs past the end of the %d "
                         "bytes" % (m, n))
    (p,) = struct.unpack_from("<Q", data, HEADER_BYTES + m)
    params_at = HEADER_BYTES + m + 8
    checksum_at = params_at + 4 * p
    if checksum_at + 8 > n:
        raise ValueError("truncated: %d parameters (%d bytes) and the checksum run past the "
                         "end of the %d bytes" % (p, 4 * p, n))
    if checksum_at + 8 < n:
        raise ValueError("%d trailing bytes after the checksum" % (n - checksum_at - 8))
    (stored,) = struct.unpack_from("<Q", data, checksum_at)
    computed = xxhash.xxh64_intdigest(data[:checksum_at], seed=0)
    if stored != computed:
        raise ValueError("checksum mismatch: the file says %016x, its bytes hash to %016x"
                         % (stored, computed))
    try:
        text = data[HEADER_BYTES:HEADER_BYTES + m].decode("utf-8")
        meta = json.loads(text, object_pairs_hook=_no_duplicate_keys,
                          parse_constant=_reject_constant)
    except UnicodeDecodeError as e:
        raise ValueError("metadata: not UTF-8 (%s)" % e)
    except json.JSONDecodeError as e:
        raise ValueError("metadata: not JSON (%s)" % e)
    check_metadata(meta)
    expected = parameter_count(meta)
    if p != expected:
        raise ValueError("the file holds %d parameters, the network needs %d" % (p, expected))
    params = np.frombuffer(data, dtype="<f4", count=p, offset=params_at).astype(np.float32)
    if not np.all(np.isfinite(params)):
        raise ValueError("parameter %d is not a finite number"
                         % int(np.flatnonzero(~np.isfinite(params))[0]))
    weights = []
    at = 0
    for inputs, outputs in layer_shapes(meta):
        w = params[at:at + inputs * outputs].reshape(inputs, outputs)
        at += inputs * outputs
        b = params[at:at + outputs]
        at += outputs
        weights.append((w, b))
    return {"metadata": meta, "parameters": params, "layers": weights[:-1],
            "head": weights[-1], "positions": [float(x) for x in meta["positions"]],
            "checksum": stored}


def policy_bytes(metadata, parameters):
    """The bytes of a version-1 file holding `metadata` (a dict) and `parameters` (float32
    values in file order): the writer the self-test uses."""
    meta = json.dumps(metadata).encode("utf-8")
    params = np.asarray(parameters, dtype="<f4").tobytes()
    body = (MAGIC + struct.pack("<I", VERSION) + struct.pack("<Q", len(meta)) + meta
            + struct.pack("<Q", len(params) // 4) + params)
    return body + struct.pack("<Q", xxhash.xxh64_intdigest(body, seed=0))


# ----------------------------------------------------------------------------------------
# Bars
# ----------------------------------------------------------------------------------------

def read_bars_csv(path):
    """Read a CSV bar file: a header row, then one row per bar.

    Returns a dict: names (header, in order), timestamp (list of the texts), close (float64
    array), ofi (float64 array or None), text ({column name: list of the field texts}).
    Other numeric columns are converted by column(bars, name). Accepts a UTF-8 byte-order
    mark, CRLF line ends, double-quoted fields, and skips empty lines. No further validation.
    """
    with open(path, "rb") as f:
        raw = f.read()
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    text = raw.decode("utf-8")
    rows = [row for row in csv.reader(io.StringIO(text, newline=""))
            if row and not (len(row) == 1 and row[0].strip() == "")]
    if not rows:
        raise ValueError("%s: empty file" % path)
    names = [name.strip() for name in rows[0]]
    for name in names:
        if names.count(name) > 1:
            raise ValueError("%s: duplicated column %r" % (path, name))
    for required in ("timestamp", "close"):
        if required not in names:
            raise ValueError("%s: no %r column" % (path, required))
    columns = {name: [] for name in names}
    for line, row in enumerate(rows[1:], start=2):
        if len(row) != len(names):
            raise ValueError("%s: row %d has %d fields, the header %d"
                             % (path, line, len(row), len(names)))
        for name, field in zip(names, row):
            columns[name].append(field.strip())
    bars = {"path": path, "names": names, "timestamp": columns["timestamp"], "text": columns}
    bars["close"] = column(bars, "close")
    bars["ofi"] = column(bars, "ofi") if "ofi" in names else None
    return bars


def column(bars, name):
    """Column `name` of the bars as float64; ValueError naming it when it is missing or holds
    something that is not a finite number."""
    if name not in bars["text"]:
        raise ValueError("%s: no column %r (the policy needs it)" % (bars["path"], name))
    values = []
    for i, field in enumerate(bars["text"][name]):
        try:
            value = float(field)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise ValueError("%s: column %r, bar %d: %r is not a finite number"
                             % (bars["path"], name, i, field))
        values.append(value)
    return np.array(values, dtype=np.float64)


def bar_count(bars):
    return len(bars["timestamp"])


# ----------------------------------------------------------------------------------------
# Features
# ----------------------------------------------------------------------------------------

def feature_names(policy):
    feat = policy["metadata"]["features"]
    return (["ret_%d" % j for j in range(feat["return_window"])] + ["vol"]
            + ["ofi_%d" % j for j in range(feat["ofi_window"])] + list(feat["extra"]))


def _needed_columns(policy, bars):
    """close, ofi (when O > 0) and the extra columns, as float64 arrays; ValueError naming
    a missing one."""
    feat = policy["metadata"]["features"]
    ofi = None
    if feat["ofi_window"] > 0:
        if bars["ofi"] is None:
            raise ValueError("%s: no column 'ofi' (the policy reads %d ofi values)"
                             % (bars["path"], feat["ofi_window"]))
        ofi = bars["ofi"]
    extras = [column(bars, name) for name in feat["extra"]]
    return bars["close"], ofi, extras


def check_enough_bars(policy, bars):
    w = warmup(policy)
    if bar_count(bars) < w + 1:
        raise ValueError("%s: %d bars, too few for the warm-up: the policy needs at least "
                         "%d (the first decision is at bar W = %d)"
                         % (bars["path"], bar_count(bars), w + 1, w))


def raw_features(policy, bars, first=None, last=None):
    """Raw features of bars first..last (default W..last bar), float32 [bars, F].

    docs/POLICY.md step 1, in double precision, each stored as float32:
    ret_j = lr(t - j), j = 0..R-1; vol = sqrt(sum_j (lr(t - j) - m)^2 / (V - 1)) over
    j = 0..V-1, m their mean; ofi_j = ofi[t - j], j = 0..O-1; the extra columns at t;
    lr(s) = ln(C[s] / C[s - 1]).
    """
    check_enough_bars(policy, bars)
    feat = policy["metadata"]["features"]
    r, v, o = feat["return_window"], feat["volatility_window"], feat["ofi_window"]
    close, ofi, extras = _needed_columns(policy, bars)
    first = warmup(policy) if first is None else first
    last = bar_count(bars) - 1 if last is None else last

    def lr(s):
        return math.log(float(close[s]) / float(close[s - 1]))

    out = np.zeros((last - first + 1, policy["metadata"]["network"]["features"]),
                   dtype=np.float32)
    for row, t in enumerate(range(first, last + 1)):
        x = []
        for j in range(r):
            x.append(lr(t - j))
        returns = [lr(t - j) for j in range(v)]
        m = sum(returns) / v
        x.append(math.sqrt(sum((q - m) ** 2 for q in returns) / (v - 1)))
        for j in range(o):
            x.append(float(ofi[t - j]))
        for values in extras:
            x.append(float(values[t]))
        out[row] = np.array(x, dtype=np.float64).astype(np.float32)
    return out


def standardize(policy, raw):
    """docs/POLICY.md step 2: z_f = float32((x_f - mean_f) * (1 / stdev_f)), x_f the float32
    raw feature taken as a double, in double precision."""
    feat = policy["metadata"]["features"]
    mean = np.array(feat["mean"], dtype=np.float64)
    inverse = 1.0 / np.array(feat["stdev"], dtype=np.float64)
    return ((raw.astype(np.float64) - mean) * inverse).astype(np.float32)


def features(policy, bars, first=None, last=None):
    """Standardized features, float32 [bars, F], of bars first..last (default W..last bar);
    row i is bar first + i."""
    return standardize(policy, raw_features(policy, bars, first, last))


# ----------------------------------------------------------------------------------------
# Network and decisions
# ----------------------------------------------------------------------------------------

def one_hot(policy, index):
    k = len(policy["positions"])
    v = np.zeros(k, dtype=np.float32)
    v[index] = 1.0
    return v


def state(policy, z, incoming_index):
    """docs/POLICY.md step 3: the F standardized features, then the one-hot of the incoming
    position."""
    return np.concatenate([np.asarray(z, dtype=np.float32), one_hot(policy, incoming_index)])


def q_values(policy, state_vector):
    """docs/POLICY.md step 4 in float32: h_l = max(0, h_{l-1} W_l + b_l); Q = h_L W + b, or
    with dueling o = h_L W + b, Q_a = o_0 + o_a - mean(o_1..o_A). Works on one state [F + K]
    or a batch [n, F + K]."""
    h = np.asarray(state_vector, dtype=np.float32)
    for w, b in policy["layers"]:
        h = np.maximum(h @ w + b, np.float32(0.0))
    w, b = policy["head"]
    o = h @ w + b
    if not policy["metadata"]["network"]["dueling"]:
        return o
    value = o[..., :1]
    advantages = o[..., 1:]
    mean = advantages.sum(axis=-1, keepdims=True, dtype=np.float32) / np.float32(
        advantages.shape[-1])
    return (value + advantages) - mean


def argmax_lowest(q):
    """docs/POLICY.md step 5: the action with the largest Q; ties go to the lowest."""
    best = 0
    for a in range(1, len(q)):
        if q[a] > q[best]:
            best = a
    return best


def flat_index(policy):
    return policy["positions"].index(0.0)


def position_index(policy, position):
    """Index of a position value in the policy's positions; ValueError when it is not one."""
    for i, p in enumerate(policy["positions"]):
        if float(position) == p:
            return i
    raise ValueError("position %r is not one of the policy's positions %r"
                     % (position, policy["positions"]))


def check_bar_range(policy, bars, first, last):
    check_enough_bars(policy, bars)
    n, w = bar_count(bars), warmup(policy)
    for name, t in (("first", first), ("last", last)):
        if not 0 <= t < n:
            raise ValueError("bar %d (%s) is outside the data: bars 0..%d" % (t, name, n - 1))
        if t < w:
            raise ValueError("bar %d (%s) is before the warm-up: the first bar with a "
                             "decision is W = %d" % (t, name, w))
    if first > last:
        raise ValueError("--from %d is after --to %d" % (first, last))


def decide(policy, bars, first, last, incoming_index=None):
    """The decisions at bars first..last inclusive, carrying the position.

    incoming_index: index in positions of the position held before bar `first` (default the
    index of 0.0). Returns [{"bar": t, "q": [floats], "action": a, "position": positions[a]}].
    """
    check_bar_range(policy, bars, first, last)
    if incoming_index is None:
        incoming_index = flat_index(policy)
    z = features(policy, bars, first, last)
    records = []
    for row, t in enumerate(range(first, last + 1)):
        q = q_values(policy, state(policy, z[row], incoming_index))
        a = argmax_lowest(q)
        position = policy["positions"][a]
        records.append({"bar": t, "q": [float(x) for x in q], "action": a,
                        "position": position})
        # Step 6: the position is the incoming position of the next decision; step 3 sets
        # the one-hot at the index of that position in positions.
        incoming_index = position_index(policy, position)
    return records


def every_position(policy, bars, first, last):
    """The decision at bars first..last inclusive coming in with each position (by index),
    nothing carried: [{"bar": t, "incoming": i, "q": [floats], "action": a}], bar by bar."""
    check_bar_range(policy, bars, first, last)
    z = features(policy, bars, first, last)
    records = []
    for row, t in enumerate(range(first, last + 1)):
        for i in range(len(policy["positions"])):
            q = q_values(policy, state(policy, z[row], i))
            records.append({"bar": t, "incoming": i, "q": [float(x) for x in q],
                            "action": argmax_lowest(q)})
    return records


# ----------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------

def check_summary(path, policy):
    return {"file": path, "version": VERSION, "parameters": int(len(policy["parameters"])),
            "checksum": "%016x" % policy["checksum"], "warmup": warmup(policy),
            "feature_names": feature_names(policy), "metadata": policy["metadata"]}


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Reference reader of .dqnpolicy files and their decisions "
                    "(docs/POLICY.md, docs/FEATURES.md).")
    parser.add_argument("policy", nargs="?", metavar="POLICY")
    parser.add_argument("bars", nargs="?", metavar="BARS.csv")
    parser.add_argument("--from", dest="first", type=int, metavar="BAR")
    parser.add_argument("--to", dest="last", type=int, metavar="BAR")
    parser.add_argument("--position", type=float, metavar="P")
    parser.add_argument("--every-position", action="store_true")
    parser.add_argument("--check", metavar="POLICY")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args(argv)

    if args.self_test:
        return self_test()
    try:
        if args.check is not None:
            if args.policy is not None:
                parser.error("--check takes the policy only")
            policy = read_policy(args.check)
            print(json.dumps(check_summary(args.check, policy)))
            return 0
        if args.policy is None or args.bars is None:
            parser.error("give POLICY and BARS.csv, or --check POLICY, or --self-test")
        policy = read_policy(args.policy)
        bars = read_bars_csv(args.bars)
        check_enough_bars(policy, bars)
        n = bar_count(bars)
        if args.first is None and args.last is None:
            first = last = n - 1
        else:
            first = warmup(policy) if args.first is None else args.first
            last = n - 1 if args.last is None else args.last
        if args.every_position:
            if args.position is not None:
                parser.error("--every-position takes every position: drop --position")
            records = every_position(policy, bars, first, last)
        else:
            incoming = None
            if args.position is not None:
                incoming = position_index(policy, args.position)
            records = decide(policy, bars, first, last, incoming)
    except (ValueError, OSError) as e:
        print("policy_reference.py: %s" % e, file=sys.stderr)
        return 2
    for record in records:
        print(json.dumps(record))
    return 0


# ----------------------------------------------------------------------------------------
# Self-test
# ----------------------------------------------------------------------------------------

def _write_bars(path, rng, n, extra_names, with_ofi, fancy=False):
    """A random walk of n bars (positive prices) as CSV; fancy: BOM, CRLF, quotes, empty
    lines."""
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, n)))
    opens = np.concatenate([[100.0], close[:-1]])
    names = ["timestamp", "open", "high", "low", "close", "volume"]
    names += (["ofi"] if with_ofi else []) + list(extra_names)
    lines = [",".join(('"%s"' % s) if fancy else s for s in names)]
    for i in range(n):
        hi = max(opens[i], close[i]) * 1.001
        lo = min(opens[i], close[i]) * 0.999
        fields = [str(1700000000 + 60 * i), repr(opens[i]), repr(hi), repr(lo),
                  repr(close[i]), repr(float(rng.integers(1, 1000)))]
        if with_ofi:
            fields.append(repr(float(rng.normal())))
        fields += [repr(float(rng.normal(5.0, 2.0))) for _ in extra_names]
        if fancy:
            fields = ['"%s"' % s if k % 2 == 0 else s for k, s in enumerate(fields)]
        lines.append(",".join(fields))
        if fancy and i % 7 == 3:
            lines.append("")
    if fancy:
        data = b"\xef\xbb\xbf" + ("\r\n".join(lines) + "\r\n").encode("utf-8")
    else:
        data = ("\n".join(lines) + "\n").encode("utf-8")
    with open(path, "wb") as f:
        f.write(data)


def _make_policy(rng, bars, r, v, o, extra, hidden, positions, dueling):
    """Metadata and random parameters; mean/stdev the population statistics of the bars'
    raw features (so that the standardized features are of order 1)."""
    f = r + 1 + o + len(extra)
    k = len(positions)
    meta = {"network": {"features": f, "positions": k, "hidden": hidden, "actions": k,
                        "dueling": dueling},
            "features": {"return_window": r, "volatility_window": v, "ofi_window": o,
                         "extra": extra, "mean": [0.0] * f, "stdev": [1.0] * f},
            "positions": positions,
            "info": {"epoch": 3, "validation_sharpe": 1.25, "data_fingerprint": "self-test"}}
    provisional = {"metadata": meta}
    raw = raw_features(provisional, bars).astype(np.float64)
    meta["features"]["mean"] = [float(x) for x in raw.mean(axis=0)]
    sd = raw.std(axis=0)
    meta["features"]["stdev"] = [float(x) if x > 0 else 1.0 for x in sd]
    params = []
    for layer, (inputs, outputs) in enumerate(layer_shapes(meta)):
        w = rng.normal(0.0, 1.0 / math.sqrt(inputs), (inputs, outputs))
        if layer == 0:
            w[f:] *= 4.0  # the incoming position's rows: large enough to change decisions
        params.append(w.ravel())
        # Hidden biases small; the head's of order 1, so that no Q-vector is all near 0 (a
        # relative comparison of Q-values near 0 would measure the cancellation of their sums).
        head = layer == len(hidden)
        params.append(rng.normal(0.0, 1.0 if head else 0.1, outputs))
    return meta, np.concatenate(params).astype(np.float32)


def _plain_q(policy, state_vector):
    """Q-values written a second, plain way: explicit loops over the units, float64."""
    h = [float(x) for x in state_vector]
    for w, b in policy["layers"]:
        inputs, outputs = w.shape
        nxt = []
        for j in range(outputs):
            s = float(b[j])
            for i in range(inputs):
                s += h[i] * float(w[i, j])
            nxt.append(s if s > 0.0 else 0.0)
        h = nxt
    w, b = policy["head"]
    inputs, outputs = w.shape
    o = []
    for j in range(outputs):
        s = float(b[j])
        for i in range(inputs):
            s += h[i] * float(w[i, j])
        o.append(s)
    if not policy["metadata"]["network"]["dueling"]:
        return o
    value = o[0]
    advantages = o[1:]
    mean_advantage = sum(advantages) / len(advantages)
    return [value + a - mean_advantage for a in advantages]


def _plain_raw_features(policy, bars, first, last):
    """Raw features a second way: numpy over the whole series, float64."""
    feat = policy["metadata"]["features"]
    r, v, o = feat["return_window"], feat["volatility_window"], feat["ofi_window"]
    lr = np.empty(bar_count(bars))
    lr[0] = np.nan
    lr[1:] = np.log(bars["close"][1:] / bars["close"][:-1])
    rows = []
    for t in range(first, last + 1):
        x = list(lr[t - r + 1:t + 1][::-1])
        x.append(np.std(lr[t - v + 1:t + 1], ddof=1))
        if o > 0:
            x += list(bars["ofi"][t - o + 1:t + 1][::-1])
        x += [column(bars, name)[t] for name in feat["extra"]]
        rows.append(x)
    return np.array(rows, dtype=np.float64)


def _raises(fn):
    try:
        fn()
    except ValueError:
        return True
    return False


def _run_cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


def self_test():
    checks = []

    def report(name, ok, detail=""):
        checks.append(bool(ok))
        print("%s %s%s" % ("PASS" if ok else "FAIL", name, (": " + detail) if detail else ""))
        sys.stdout.flush()

    began = time.perf_counter()
    rng = np.random.default_rng(20240131)
    configs = [
        # (name, R, V, O, extra, hidden, positions, dueling)
        ("plain head, no ofi, no extra", 4, 6, 0, [], [8, 6], [-1.0, 0.0, 1.0], False),
        ("dueling head, no ofi, no extra", 5, 3, 0, [], [7], [-1.0, 0.0, 0.5, 1.0], True),
        ("plain head, ofi and an extra", 3, 4, 6, ["f_x"], [9, 5], [0.0, 1.0], False),
        ("dueling head, ofi and an extra", 4, 5, 3, ["f_x"], [8, 6, 4], [-1.0, 0.0, 1.0],
         True),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for name, r, v, o, extra, hidden, positions, dueling in configs:
            csv_path = os.path.join(tmp, "bars.csv")
            _write_bars(csv_path, rng, 80, extra, o > 0)
            bars = read_bars_csv(csv_path)
            # Random parameters, drawn again (up to 100 times) until the decisions are not
            # all one position and the incoming position changes some of them, so that the
            # checks below exercise the carry.
            for attempt in range(100):
                meta, params = _make_policy(rng, bars, r, v, o, extra, hidden, positions,
                                            dueling)
                trial = parse_policy(policy_bytes(meta, params))
                zt = features(trial, bars)
                maps = [[argmax_lowest(q_values(trial, state(trial, row, k)))
                         for k in range(len(positions))] for row in zt]
                if (len(set(a for m_ in maps for a in m_)) > 1
                        and any(len(set(m_)) > 1 for m_ in maps)):
                    break
            data = policy_bytes(meta, params)
            policy_path = os.path.join(tmp, "p.dqnpolicy")
            with open(policy_path, "wb") as f:
                f.write(data)
            print("-- %s (R=%d V=%d O=%d extra=%s hidden=%s positions=%s, %d bytes)"
                  % (name, r, v, o, extra, hidden, positions, len(data)))

            # Round trip.
            policy = read_policy(policy_path)
            expected_w = max(r, v, o - 1)
            same = (policy["metadata"] == json.loads(json.dumps(meta))
                    and np.array_equal(policy["parameters"], params)
                    and len(policy["layers"]) == len(hidden)
                    and warmup(policy) == expected_w)
            flat = np.concatenate([np.concatenate([w.ravel(), b])
                                   for w, b in policy["layers"] + [policy["head"]]])
            same = same and np.array_equal(flat, params)
            w1 = policy["layers"][0][0]
            same = same and w1.shape == (r + 1 + o + len(extra) + len(positions), hidden[0])
            same = same and w1[1, 0] == params[hidden[0]]  # row-major: row 1 starts at H_1
            report("round trip: metadata, parameters, shapes, W = %d" % expected_w, same)

            # Every single-byte flip and every truncation is refused.
            flips = [i for i in range(len(data))
                     if not _raises(lambda i=i: parse_policy(
                         data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:]))]
            report("each of the %d one-byte flips raises" % len(data), not flips,
                   "accepted at %s" % flips[:10] if flips else "")
            cuts = [n for n in range(len(data)) if not _raises(lambda n=n: parse_policy(data[:n]))]
            report("each truncation (0 .. %d bytes) raises" % (len(data) - 1), not cuts,
                   "accepted at %s" % cuts[:10] if cuts else "")

            # Layout errors with a valid checksum, each caught by its own check.
            def resealed(body):
                return body + struct.pack("<Q", xxhash.xxh64_intdigest(body, seed=0))

            body = data[:-8]
            m = struct.unpack_from("<Q", data, 12)[0]
            bad_meta = dict(meta, network=dict(meta["network"],
                                               features=meta["network"]["features"] + 1))
            short_mean = dict(meta, features=dict(meta["features"],
                                                  mean=meta["features"]["mean"][:-1]))
            cases = {
                "trailing byte": (data + b"\0", "trailing"),
                "bad magic": (resealed(b"DQNPOLCZ" + body[8:]), "magic"),
                "version 2": (resealed(body[:8] + struct.pack("<I", 2) + body[12:]),
                              "version"),
                "one parameter short (P fixed up)": (resealed(
                    body[:HEADER_BYTES + m] + struct.pack("<Q", len(params) - 1)
                    + body[HEADER_BYTES + m + 8:-4]), "parameters"),
                "network.features != F": (policy_bytes(bad_meta, params), "network.features"),
                "mean of F - 1 numbers": (policy_bytes(short_mean, params), "mean"),
                "metadata length past the end": (
                    body[:12] + struct.pack("<Q", len(data)) + body[20:] + data[-8:],
                    "truncated"),
            }
            wrong = []
            for case, (blob, word) in cases.items():
                try:
                    parse_policy(blob)
                    wrong.append("%s: accepted" % case)
                except ValueError as e:
                    if word not in str(e):
                        wrong.append("%s: %s" % (case, e))
            report("layout errors behind a valid checksum: %s" % ", ".join(cases), not wrong,
                   "; ".join(wrong))

            # Features: the loops of raw_features against numpy over the whole series.
            w = warmup(policy)
            last = bar_count(bars) - 1
            raw = raw_features(policy, bars)
            plain = _plain_raw_features(policy, bars, w, last)
            err = float(np.max(np.abs(raw - plain) / np.maximum(np.abs(plain), 1e-30)))
            report("raw features (%d bars x %d) vs numpy float64, relative error <= 1e-6"
                   % raw.shape, raw.shape == plain.shape and err <= 1e-6, "%.1e" % err)
            z = features(policy, bars)
            zstats = (float(np.abs(z.astype(np.float64).mean(axis=0)).max()),
                      float(np.abs(z.astype(np.float64).std(axis=0) - 1.0).max()))
            report("standardized with the bars' own statistics: mean ~0, stdev ~1",
                   zstats[0] < 1e-5 and zstats[1] < 1e-5, "max |mean| %.1e, max |sd-1| %.1e"
                   % zstats)

            # Decisions carry the position.
            records = decide(policy, bars, w, last)
            start = flat_index(policy)
            carried = True
            for i, rec in enumerate(records):
                incoming = start if i == 0 else position_index(policy, records[i - 1]["position"])
                q = q_values(policy, state(policy, z[i], incoming))
                carried &= rec["bar"] == w + i and rec["q"] == [float(x) for x in q]
                carried &= rec["action"] == argmax_lowest(q)
                carried &= rec["position"] == positions[rec["action"]]
            chained = []
            incoming = None
            for t in range(w, last + 1):
                one = decide(policy, bars, t, t, incoming)[0]
                chained.append(one)
                incoming = position_index(policy, one["position"])
            distinct = sorted(set(rec["position"] for rec in records))
            report("decisions at bars %d..%d carry the position (Q of each = network on the "
                   "previous decision's one-hot; = one bar at a time chained)" % (w, last),
                   carried and chained == records, "positions taken %s" % distinct)
            # Every position at every bar: each row is the carried path's decision where that
            # path came in with the row's position.
            table = every_position(policy, bars, w, last)
            K = len(positions)
            matches = len(table) == K * len(records) and all(
                table[i * K + (start if i == 0 else
                               position_index(policy, records[i - 1]["position"]))]["q"]
                == rec["q"] for i, rec in enumerate(records))
            report("every position at every bar: %d rows, the carried path's among them"
                   % len(table), matches)
            depends = any(
                len(set(argmax_lowest(q_values(policy, state(policy, z[i], k)))
                        for k in range(len(positions)))) > 1 for i in range(len(z)))
            report("the incoming position changes some decision (the carry is exercised)",
                   depends)

            # The map-and-scan of docs/FEATURES.md gives the sequential positions.
            maps = [[argmax_lowest(q_values(policy, state(policy, z[i], k)))
                     for k in range(len(positions))] for i in range(len(z))]
            composed = list(range(len(positions)))  # identity
            scanned = []
            for bar_map in maps:
                composed = [bar_map[composed[k]] for k in range(len(positions))]
                scanned.append(positions[composed[start]])
            report("inclusive scan of per-bar maps = sequential positions",
                   scanned == [rec["position"] for rec in records])

            # The network against explicit float64 loops.
            worst = 0.0
            for i in range(len(z)):
                for k in range(len(positions)):
                    s = state(policy, z[i], k)
                    q32 = q_values(policy, s).astype(np.float64)
                    q64 = np.array(_plain_q(policy, s))
                    worst = max(worst, float(np.max(np.abs(q32 - q64))
                                             / max(np.max(np.abs(q64)), 1e-30)))
            head = "V + A - mean(A)" if dueling else "h W + b"
            report("Q (%s) float32 vs explicit float64 loops, every bar and incoming position, "
                   "relative to max |Q| <= 1e-5" % head, worst <= 1e-5, "%.1e" % worst)

            # Command line.
            code, out, err = _run_cli([policy_path, csv_path])
            lines = [json.loads(line) for line in out.splitlines()]
            ok = code == 0 and lines == [decide(policy, bars, last, last)[0]]
            code, out, err = _run_cli([policy_path, csv_path, "--from", str(w + 2)])
            ok = ok and code == 0 and [json.loads(x) for x in out.splitlines()] == decide(
                policy, bars, w + 2, last)
            code, out, err = _run_cli([policy_path, csv_path, "--to", str(w + 5),
                                       "--position", repr(positions[-1])])
            ok = ok and code == 0 and [json.loads(x) for x in out.splitlines()] == decide(
                policy, bars, w, w + 5, len(positions) - 1)
            code, out, err = _run_cli(["--check", policy_path])
            ok = ok and code == 0 and json.loads(out)["metadata"] == policy["metadata"]
            report("command line: latest bar, --from, --to with --position, --check", ok)

            errors = []
            for argv, word in (
                    ([policy_path, csv_path, "--position", "0.25"], "position"),
                    ([policy_path, csv_path, "--from", str(w - 1)], "warm-up"),
                    ([policy_path, csv_path, "--to", str(last + 1)], "outside"),
                    ([policy_path, csv_path, "--from", str(w + 3), "--to", str(w + 2)], "after")):
                code, out, err = _run_cli(argv)
                if code != 2 or word not in err:
                    errors.append("%s -> %s %r" % (argv[2:], code, err))
            few_path = os.path.join(tmp, "few.csv")
            _write_bars(few_path, rng, w, extra, o > 0)
            code, out, err = _run_cli([policy_path, few_path])
            if code != 2 or ("at least %d" % (w + 1)) not in err:
                errors.append("too few bars -> %s %r" % (code, err))
            if extra or o:
                bare_path = os.path.join(tmp, "bare.csv")
                _write_bars(bare_path, rng, 40, [], False)
                code, out, err = _run_cli([policy_path, bare_path])
                needed = "'ofi'" if o else repr(extra[0])
                if code != 2 or needed not in err:
                    errors.append("missing column -> %s %r" % (code, err))
            bad_path = os.path.join(tmp, "bad.dqnpolicy")
            with open(bad_path, "wb") as f:
                f.write(data[:-1] + bytes([data[-1] ^ 1]))
            code, out, err = _run_cli([bad_path, csv_path])
            if code != 2 or "checksum" not in err:
                errors.append("bad checksum -> %s %r" % (code, err))
            code, out, err = _run_cli(["--check", bad_path])
            if code != 2 or "checksum" not in err:
                errors.append("--check bad checksum -> %s %r" % (code, err))
            report("command line errors exit 2 with a message (position, warm-up, outside, "
                   "order, too few bars%s, checksum)" % (", missing column" if extra or o
                                                         else ""),
                   not errors, "; ".join(errors))

        # CSV dialect: BOM, CRLF, quotes and empty lines read as the plain file.
        seed = 77
        plain_path = os.path.join(tmp, "plain.csv")
        fancy_path = os.path.join(tmp, "fancy.csv")
        _write_bars(plain_path, np.random.default_rng(seed), 30, ["f_x"], True)
        _write_bars(fancy_path, np.random.default_rng(seed), 30, ["f_x"], True, fancy=True)
        a, b = read_bars_csv(plain_path), read_bars_csv(fancy_path)
        report("CSV with BOM, CRLF, quoted fields and empty lines = the plain CSV",
               a["names"] == b["names"] and a["timestamp"] == b["timestamp"]
               and np.array_equal(a["close"], b["close"]) and np.array_equal(a["ofi"], b["ofi"])
               and np.array_equal(column(a, "f_x"), column(b, "f_x")) and bar_count(b) == 30)

    elapsed = time.perf_counter() - began
    print("%d of %d checks passed in %.1f s" % (sum(checks), len(checks), elapsed))
    return 0 if all(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
