"""dqntrader: Deep Q-Network trading agents, trained and backtested on the device.

The functions here are the library's own entry points, the ones the ``dqntrader`` command
calls: a run trained by :func:`train` is the run ``dqntrader train`` makes with the same
settings, file for file. Bars come in as :class:`Bars` (from NumPy arrays, a pandas
DataFrame, a CSV or .dqnbars file, or the built-in synthetic market); results come back as
dicts, lists and NumPy arrays (pandas DataFrames where pandas is installed).

The device is started at the first call (the backend the module was built with, see
:func:`info`) and released when the interpreter exits. One call runs at a time, from the
thread that made the first. While the library works the GIL is released; Ctrl-C stops a
training run or a sweep at the next step, its last checkpoint intact (continue it with
``resume=``).
"""

import atexit
import json
import math
import numbers
import os
import sys

import numpy as np

from . import _core

__all__ = [
    "Bars",
    "Policy",
    "Run",
    "Sweep",
    "backtest",
    "configure",
    "info",
    "load_policy",
    "settings",
    "sweep",
    "synth",
    "train",
]

atexit.register(_core.finalize)


# ---- arguments ---------------------------------------------------------------------------------


def _whole(name, value, least=0, most=2**63 - 1):
    """value as an int: a whole number (not a bool, not 2.5) from least to most; TypeError or
    ValueError naming the argument (name=)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}= takes a whole number, not {value!r}")
    value = int(value)
    if value < least or value > most:
        raise ValueError(f"{name}={value}: from {least} to {most}")
    return value


def _number(name, value):
    """value as a finite float; TypeError or ValueError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}= takes a number, not {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name}={value!r}: not a finite number")
    return float(value)


def _names(name, value):
    """A list of column names: one name (a str) or an iterable of them."""
    if isinstance(value, str):
        return [value]
    names = list(value)
    for item in names:
        if not isinstance(item, str):
            raise TypeError(f"{name}= takes column names (str), not {item!r}")
    return names


def configure(threads=None, device=None):
    """Sets the host threads (OpenMP) or the GPU ordinal (CUDA) before the first call.

    threads: 1 to four per hardware thread; device: from 0. Without it the device starts
    with Kokkos's defaults (OMP_NUM_THREADS, GPU 0). RuntimeError once the device has started.
    """
    threads = -1 if threads is None else _whole("threads", threads, 1)
    device = -1 if device is None else _whole("device", device, 0, 2**31 - 1)
    _core.configure(threads, device)


def info():
    """The build: version, revision, backend (openmp or cuda), products library, Kokkos."""
    return _core.info()


def settings():
    """Every training setting as a dict: name (as ``dqntrader settings`` spells it), default,
    help, kind (number, text, list or flag). In Python a setting's name has ``_`` for ``-``."""
    return _core.settings()


# ---- bars -------------------------------------------------------------------------------------


_NAT = np.iinfo(np.int64).min  # NaT as int64: the library refuses it, naming the bar


def _milliseconds(timestamp):
    """UTC milliseconds since the epoch from datetime64 values, ISO-8601 strings, pandas
    timestamps (a zone is converted to UTC) or integers, which are read as the CSV reader reads
    them: epoch seconds, or epoch milliseconds when the first is 1e11 or more (the year 5138 in
    seconds). NaT stays missing (the bars are then refused, naming the bar)."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is optional
        pd = None
    if pd is not None and isinstance(timestamp, (pd.Series, pd.Index)):
        if timestamp.dtype.kind in "iu":
            return _core.epoch_milliseconds(timestamp.to_numpy(dtype=np.int64))
        values = pd.DatetimeIndex(pd.to_datetime(timestamp))
        if values.tz is not None:
            values = values.tz_convert("UTC").tz_localize(None)
        missing = np.asarray(values.isna())
        out = values.to_numpy(dtype="datetime64[ms]").astype(np.int64)
        out[missing] = _NAT
        return out
    values = np.asarray(timestamp)
    if values.dtype.kind == "u" and values.size and values.max() > np.iinfo(np.int64).max:
        raise ValueError("timestamp: a value is out of range")
    if values.dtype.kind in "iu":
        return _core.epoch_milliseconds(values.astype(np.int64))
    if values.dtype.kind == "b":
        raise TypeError("timestamp: booleans are not times")
    try:
        out = values.astype("datetime64[ms]")
    except (ValueError, TypeError) as error:
        raise ValueError(f"timestamp: {error}") from None
    return out.astype(np.int64)  # NaT is the smallest int64


_STANDARD_COLUMNS = ("timestamp", "open", "high", "low", "close", "volume", "ofi")


class Bars:
    """One instrument's bars in time order, validated as the CSV reader validates a file.

    Make them with :meth:`from_arrays`, :meth:`from_pandas`, :meth:`from_file` or
    :func:`synth`. A bad value raises ValueError naming the bar (its row, from 0) and the
    column. Columns come back as NumPy arrays (``bars.close``, ``bars.timestamp``,
    ``bars.features``) or as a DataFrame (:meth:`to_pandas`).
    """

    def __init__(self, core):
        self._core = core

    @classmethod
    def from_arrays(cls, timestamp, open, high, low, close, volume=None, ofi=None, *,
                    source="arrays", **features):
        """Bars from columns of equal length.

        timestamp: datetime64 values, ISO-8601 strings or integers (epoch seconds, or epoch
        milliseconds when the first is 1e11 or more, as the CSV reader reads them), strictly
        increasing, within the years 0000 to 9999. open, high, low, close: prices > 0 with low <= open, close
        <= high. volume (>= 0) and ofi (order-flow imbalance) are optional; every other keyword
        is an extra feature column (it enters a policy's features when a run selects it:
        feature_columns=[...]).
        """
        extra = []
        for name, values in features.items():
            try:
                extra.append((name, np.asarray(values, dtype=np.float64)))
            except (TypeError, ValueError) as error:
                raise ValueError(f"column {name!r}: {error}") from None
        as_array = lambda a: None if a is None else np.asarray(a, dtype=np.float64)
        return cls(_core.Bars.from_columns(
            source, _milliseconds(timestamp), as_array(open), as_array(high), as_array(low),
            as_array(close), as_array(volume), as_array(ofi), extra))

    @classmethod
    def from_pandas(cls, df, *, columns=(), prefixes=(), source="DataFrame"):
        """Bars from a DataFrame: a DatetimeIndex or a ``timestamp`` column; columns open,
        high, low, close, optionally volume and ofi, and the extra feature columns named in
        columns or starting with one of prefixes (others are ignored, as the CSV reader
        ignores them)."""
        columns, prefixes = _names("columns", columns), _names("prefixes", prefixes)
        standard = [c for c in columns if c in _STANDARD_COLUMNS]
        if standard:
            raise ValueError(f"columns={columns!r}: {standard[0]!r} is a standard column (read "
                             "when present); columns= names extra feature columns")
        if "timestamp" in df.columns:
            timestamp = df["timestamp"]
        else:
            import pandas as pd
            if not isinstance(df.index, pd.DatetimeIndex):
                raise ValueError(f"{source}: no 'timestamp' column and no DatetimeIndex")
            timestamp = df.index
        missing = [c for c in ("open", "high", "low", "close") if c not in df.columns]
        if missing:
            raise ValueError(f"{source}: missing column(s) {', '.join(missing)}")
        extra = {c: df[c].to_numpy(dtype=np.float64) for c in df.columns
                 if c not in _STANDARD_COLUMNS
                 and (c in columns or any(str(c).startswith(p) for p in prefixes if p))}
        missing = [c for c in columns if c not in df.columns]
        if missing:
            raise ValueError(f"columns=: {source} has no column {missing[0]!r}")
        optional = {c: df[c].to_numpy(dtype=np.float64) for c in ("volume", "ofi")
                    if c in df.columns}
        return cls.from_arrays(timestamp, df["open"].to_numpy(dtype=np.float64),
                               df["high"].to_numpy(dtype=np.float64),
                               df["low"].to_numpy(dtype=np.float64),
                               df["close"].to_numpy(dtype=np.float64), source=source,
                               **optional, **extra)

    @classmethod
    def from_file(cls, path, *, columns=(), prefixes=()):
        """Bars from a CSV file or a .dqnbars cache (by its extension), as ``dqntrader`` reads
        them; columns and prefixes choose the extra feature columns. A bad row raises
        ValueError "path:line:column: what"."""
        return cls(_core.Bars.from_file(os.fspath(path), _names("columns", columns),
                                        _names("prefixes", prefixes)))

    def __len__(self):
        return len(self._core)

    def __repr__(self):
        return f"<dqntrader.Bars {len(self)} bars from {self.source}>"

    @property
    def source(self):
        """Where the bars came from (a file's path, "DataFrame", "arrays", "synthetic")."""
        return self._core.source

    @property
    def fingerprint(self):
        """XXH64 of the bars' values, as runs, policies and sweeps record their data's."""
        return self._core.fingerprint

    def _column(self, name):
        return self._core.column(name)

    @property
    def timestamp(self):
        """The bars' times, datetime64[ms] (UTC)."""
        return self._core.timestamps().astype("datetime64[ms]")

    open = property(lambda self: self._column("open"), doc="Open prices.")
    high = property(lambda self: self._column("high"), doc="High prices.")
    low = property(lambda self: self._column("low"), doc="Low prices.")
    close = property(lambda self: self._column("close"), doc="Close prices.")
    volume = property(lambda self: self._column("volume"), doc="Volume, or None.")
    ofi = property(lambda self: self._column("ofi"), doc="Order-flow imbalance, or None.")

    @property
    def features(self):
        """The extra feature columns, name -> array."""
        return {k: v for k, v in self._core.columns().items() if k not in _STANDARD_COLUMNS}

    def slice(self, begin, end):
        """Bars begin .. end - 1 (every column cut alike), 0 <= begin < end <= len(bars)."""
        return Bars(self._core.slice(_whole("begin", begin), _whole("end", end)))

    def to_pandas(self):
        """The bars as a DataFrame indexed by their times (UTC)."""
        import pandas as pd
        index = pd.DatetimeIndex(self.timestamp, name="timestamp")
        return pd.DataFrame(self._core.columns(), index=index)

    def save(self, path):
        """Writes the bars as CSV, or as a .dqnbars cache when path ends so (atomically)."""
        self._core.save(os.fspath(path))


def synth(bars=20000, *, seed=1, start="2000-01-03", interval_ms=86_400_000, initial_price=100.0,
          ofi_signal=0.3):
    """The built-in synthetic market (``dqntrader synth``): daily bars with a planted signal in
    ofi that a policy can learn; the same arguments give the same bars on every machine."""
    bars = _whole("bars", bars, 2, 2**30)
    seed = _whole("seed", seed, 0, 2**64 - 1)
    interval_ms = _whole("interval_ms", interval_ms, 1)
    initial_price = _number("initial_price", initial_price)
    if initial_price <= 0:
        raise ValueError(f"initial_price={initial_price}: a price is positive")
    ofi_signal = _number("ofi_signal", ofi_signal)
    if not isinstance(start, str):
        raise TypeError(f"start= takes an ISO-8601 date, not {start!r}")
    start_ms = int(_milliseconds(np.array([start]))[0])
    if start_ms == _NAT:
        raise ValueError(f"start={start!r}: not a date")
    return Bars(_core.Bars.synth(bars, seed, start_ms, interval_ms, initial_price, ofi_signal))


def _bars_directory():
    """Where bars given in memory are stored for the runs that train on them."""
    if os.environ.get("DQNTRADER_BARS_DIR"):
        return os.environ["DQNTRADER_BARS_DIR"]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "dqntrader", "bars")


def _data_path(bars):
    """A path ``dqntrader`` can read the bars from: a path as it is; Bars from a file, that
    file; Bars made in memory stored once by their fingerprint as a .dqnbars cache."""
    if bars is None:
        return None
    if isinstance(bars, (str, os.PathLike)):
        return os.fspath(bars)
    if not isinstance(bars, Bars):
        raise TypeError(f"expected Bars or a path, not {type(bars).__name__}")
    directory = _bars_directory()
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, bars.fingerprint + ".dqnbars")
    if not os.path.exists(path):
        bars.save(path)
    return path


def _with_data(settings, bars, val_bars, test_bars):
    """The settings with the data, validation and test files of the bars given."""
    given = dict(settings)
    for key, value in (("data", bars), ("val_data", val_bars), ("test_data", test_bars)):
        if value is not None:
            given[key] = _data_path(value)
    return given


# ---- settings, logs ---------------------------------------------------------------------------


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def _settings_json(given):
    plain = {}
    for name, value in given.items():
        value = _plain(value)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, float) and not math.isfinite(item):
                raise ValueError(f"{name}={value!r}: not a finite number")
        plain[name.replace("_", "-")] = value
    return json.dumps(plain)


def _log_target(log):
    if log is True:
        return lambda line: print(line, file=sys.stderr, flush=True)
    if log is False or log is None:
        return None
    if callable(log):
        return log
    raise TypeError("log: True (standard error), False (nothing) or a callable taking a line")


def _records(path):
    records = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:  # an interrupted write's partial last line
                    pass
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is optional
        return records
    return pd.json_normalize(records)


def _read_json(path):
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


# ---- training ---------------------------------------------------------------------------------


class Run:
    """A training run's directory and what it holds (the files src/dqntrader/train/
    training_run.hpp lists); result: what train() returned of it (epochs, best_epoch,
    best_sharpe, last_sharpe, stopped_early)."""

    def __init__(self, directory, result=None):
        self.dir = directory
        self.result = result or {}

    def __repr__(self):
        return f"<dqntrader.Run {self.dir}>"

    @property
    def config(self):
        """Every effective setting (config.json)."""
        return _read_json(os.path.join(self.dir, "config.json"))

    @property
    def final_metrics(self):
        """final_metrics.json: the best policy's validation metrics, the baselines', and under
        "test" the unseen test window's (None before the run finished)."""
        return _read_json(os.path.join(self.dir, "final_metrics.json"))

    @property
    def test(self):
        """The test window's metrics (final_metrics.json's "test"), or None."""
        final = self.final_metrics
        return None if final is None else final.get("test")

    @property
    def records(self):
        """metrics.jsonl: one record per epoch, as a DataFrame (nested keys joined by '.')
        where pandas is installed, else a list of dicts."""
        return _records(os.path.join(self.dir, "metrics.jsonl"))

    def policy(self, which="best"):
        """The run's best (or last) policy."""
        return load_policy(os.path.join(self.dir, f"{which}.dqnpolicy"))


def train(bars=None, out="runs/latest", *, val_bars=None, test_bars=None, resume=None,
          force=False, progress=None, log=True, **settings):
    """Trains an agent (``dqntrader train``) and returns its :class:`Run`.

    bars: :class:`Bars` or a bar file's path (default: the built-in synthetic market);
    val_bars, test_bars: a separate validation or test window, likewise. Bars made in memory
    are stored once, by their fingerprint, as a .dqnbars file under $DQNTRADER_BARS_DIR
    (default ~/.cache/dqntrader/bars), which the run's config.json names.
    out: the run's directory. resume: continue the run in this directory from its newest
    checkpoint (settings given here override its own, e.g. epochs). force: with resume, go on
    even when settings or data differ; without, start again in an out that holds a run.
    progress: called as progress(epoch, epochs) after each epoch. log: True writes the run's
    lines to standard error, False nothing, a callable gets each line.
    settings: any training setting by name (``_`` for ``-``); an unknown name or a bad value
    raises ValueError. Ctrl-C raises KeyboardInterrupt at the next step; the run's last
    checkpoint stays valid, and ``train(resume=out)`` continues it bitwise.

    Settings and their defaults:
    """
    given = _with_data(settings, bars, val_bars, test_bars)
    if resume is None:
        given["out"] = os.fspath(out)
    elif out != "runs/latest" and os.fspath(out) != os.fspath(resume):
        raise ValueError("resume= continues the run in its own directory; drop out=")
    result = _core.train(_settings_json(given), "" if resume is None else os.fspath(resume),
                         bool(force), progress, _log_target(log))
    return Run(result["out"], result)


# ---- sweeps -----------------------------------------------------------------------------------


class Sweep:
    """A sweep's directory: its leaderboard, selection statistics and winner."""

    def __init__(self, directory):
        self.dir = directory

    def __repr__(self):
        return f"<dqntrader.Sweep {self.dir}>"

    @property
    def plan(self):
        """sweep.json: the plan, every member's result and the selection statistics."""
        return _read_json(os.path.join(self.dir, "sweep.json"))

    @property
    def selection(self):
        """How much of the winner is luck: deflated Sharpe ratio, PBO (sweep.json)."""
        plan = self.plan
        return None if plan is None else plan.get("selection")

    @property
    def leaderboard(self):
        """leaderboard.json: members and combinations ranked."""
        return _read_json(os.path.join(self.dir, "leaderboard.json"))

    def members(self):
        """The ranked members as a DataFrame (pandas) or a list of dicts."""
        board = self.leaderboard or {"members": []}
        try:
            import pandas as pd
        except ImportError:  # pragma: no cover - pandas is optional
            return board["members"]
        return pd.json_normalize(board["members"])

    def winner(self):
        """The winner's best policy (the leaderboard's first member)."""
        return load_policy(self.dir)


def _axis(text):
    """A --set argument with the setting's name as the command spells it."""
    name, equals, values = text.partition("=")
    return name.replace("_", "-") + equals + values


def sweep(bars=None, out=None, *, set=(), seeds=None, random=None, random_seed=None,
          population=None, pbo_blocks=None, schedule=None, pbt_interval=None, pbt_fraction=None,
          pbt_perturb=None, pbt_resample=None, pbt_burn_in=None, halving_rate=None,
          halving_interval=None, space=None, val_bars=None, test_bars=None, resume=None, log=True,
          **settings):
    """Trains every member of a search space (``dqntrader sweep``) and returns its
    :class:`Sweep`.

    bars: :class:`Bars` or a bar file's path (required: on the built-in market the seed would
    choose the market too); out: the sweep's directory (required). set: settings to vary, as
    ``dqntrader sweep --set`` takes them ("gamma=0.9,0.99", "learning_rate=1e-4:1e-3:log");
    seeds: "1-4" or a list; random: draws instead of the grid; space: a search-space JSON file.
    The schedule between epochs: schedule ("none", "pbt", "halving") and its pbt_* and
    halving_* options, as the command's. resume: continue the sweep in this directory.
    Other settings as :func:`train` takes them; Ctrl-C stops the sweep at the next step
    (continue it with resume=).
    """
    log_target = _log_target(log)
    if resume is not None:
        return Sweep(_core.sweep("{}", os.fspath(resume), {}, log_target))
    given = _with_data(settings, bars, val_bars, test_bars)
    if out is not None:
        given["out"] = os.fspath(out)
    if isinstance(set, str):
        set = [set]
    if seeds is not None and not isinstance(seeds, str):
        seeds = ",".join(str(_whole("seeds", s, 0, 2**64 - 1)) for s in seeds)
    if pbt_perturb is not None and not isinstance(pbt_perturb, str):
        pbt_perturb = ",".join(repr(_number("pbt_perturb", f)) for f in pbt_perturb)
    whole = {"random": random, "random_seed": random_seed, "population": population,
             "pbo_blocks": pbo_blocks, "pbt_interval": pbt_interval, "pbt_burn_in": pbt_burn_in,
             "halving_interval": halving_interval}
    for name, value in whole.items():
        if value is not None:
            _whole(name, value, 0, 2**64 - 1 if name == "random_seed" else 2**63 - 1)
    for name, value in (("pbt_fraction", pbt_fraction), ("pbt_resample", pbt_resample),
                        ("halving_rate", halving_rate)):
        if value is not None:
            _number(name, value)
    options = {
        "space": None if space is None else os.fspath(space),
        "set": [_axis(text) for text in set] or None,
        "seeds": seeds, "random": random, "random_seed": random_seed, "population": population,
        "pbo_blocks": pbo_blocks, "schedule": schedule, "pbt_interval": pbt_interval,
        "pbt_fraction": pbt_fraction, "pbt_perturb": pbt_perturb, "pbt_resample": pbt_resample,
        "pbt_burn_in": pbt_burn_in, "halving_rate": halving_rate,
        "halving_interval": halving_interval,
    }
    options = {k: v for k, v in options.items() if v is not None}
    return Sweep(_core.sweep(_settings_json(given), "", options, log_target))


# ---- backtests and policies -------------------------------------------------------------------


def _bars_of(bars):
    """Bars (their core), or a bar file's path, which the library reads with the columns the
    policies need, as the command reads --data."""
    if isinstance(bars, Bars):
        return bars._core
    if isinstance(bars, (str, os.PathLike)):
        return os.fspath(bars)
    raise TypeError(f"bars= takes Bars or a bar file's path, not {type(bars).__name__}")


def _bound(value):
    """A window's bound as ``dqntrader`` takes it: a bar index or an ISO-8601 time."""
    if value is None:
        return ""
    if isinstance(value, bool):
        raise TypeError(f"a bar is an index or a time, not {value!r}")
    if isinstance(value, (int, np.integer)):
        if value < 0:
            raise ValueError(f"bar {value}: bars count from 0")
        return str(int(value))
    if isinstance(value, str):
        return value
    try:
        return str(np.datetime64(value, "ms"))
    except (ValueError, TypeError):
        raise TypeError(f"a bar is an index or a time, not {value!r}") from None


def backtest(bars, weights=(), policies=(), *, start=None, end=None, windows=1, cost=None,
             bars_per_year=None, risk_free=None, precision=None, chunk_bars=None):
    """Backtests policy files (weights) and built-in policies (policies: "buy-and-hold",
    "flat", "sign-of-ofi") on bars, together (``dqntrader backtest``).

    start, end: the window's first and last bar (an index, or a time: the first bar at or
    after it, the last at or before it); windows: consecutive walk-forward windows. cost,
    bars_per_year, risk_free, precision, chunk_bars: as the command's options.
    Returns {"metrics": [...], "paths": [...]}: metrics as ``backtest --json`` writes them (one
    dict per policy and window: policy, window, metrics); paths one dict per policy and window
    with NumPy arrays, a row per bar return (as ``--returns``): bar, timestamp, position (held
    over the bar), return (net), equity (after it; 1 at the window's first bar).
    """
    bars = _bars_of(bars)
    if isinstance(weights, (str, os.PathLike)):
        weights = [weights]
    if isinstance(policies, str):
        policies = [policies]
    windows = _whole("windows", windows, 1)
    chunk_bars = None if chunk_bars is None else _whole("chunk_bars", chunk_bars, 1)
    cost, bars_per_year, risk_free = (None if v is None else _number(n, v) for n, v in (
        ("cost", cost), ("bars_per_year", bars_per_year), ("risk_free", risk_free)))
    result = _core.backtest(bars, [os.fspath(w) for w in weights], list(policies),
                            _bound(start), _bound(end), windows, cost, bars_per_year,
                            risk_free, precision or "", chunk_bars)
    for path in result["paths"]:
        path["timestamp"] = path.pop("timestamp_ms").astype("datetime64[ms]")
    return result


class Policy:
    """A trained policy (docs/POLICY.md): its network, features and parameters."""

    def __init__(self, core):
        self._core = core

    def __repr__(self):
        return f"<dqntrader.Policy {self.path} ({self.network})>"

    path = property(lambda self: self._core.path, doc="The policy file.")
    positions = property(lambda self: self._core.positions,
                         doc="The position each action holds.")
    network = property(lambda self: self._core.network, doc="The network, described.")
    warmup = property(lambda self: self._core.warmup,
                      doc="Bars the features read before a decision.")
    info = property(lambda self: self._core.info, doc="The file's metadata.")

    def act(self, bars, start=None, end=None, position="flat", *, precision=None,
            chunk_bars=None):
        """Decisions on bars (``dqntrader act``): at the latest bar alone (start and end None),
        or one per bar from start to end (an index or a time), each coming in with the position
        the one before took, the first with position ("flat", "long", "short" or a number).
        Returns a dict of NumPy arrays, one row per decision: bar, timestamp, incoming, q (one
        column per action), action, position (held from the next bar on)."""
        bars = _bars_of(bars)
        chunk_bars = None if chunk_bars is None else _whole("chunk_bars", chunk_bars, 1)
        result = self._core.act(bars, _bound(start), _bound(end), str(position),
                                precision or "", chunk_bars)
        result["timestamp"] = result.pop("timestamp_ms").astype("datetime64[ms]")
        return result

    def export_onnx(self, path, inputs="float64"):
        """Writes the policy's whole decision as an ONNX model (``dqntrader export --onnx``):
        each row's raw bars and incoming position in, its Q-values and action out. inputs:
        "float64" (the decision exactly; onnxruntime) or "float32" (every input float32, the
        closes in two parts; OpenCV's DNN, TensorRT). ValueError when path is the policy's own
        file."""
        if not hasattr(self._core, "export_onnx"):
            raise RuntimeError("this build has no ONNX export (built without "
                               "DQNTRADER_ENABLE_ONNX)")
        if not isinstance(inputs, str):
            raise TypeError(f"inputs= takes 'float64' or 'float32', not {inputs!r}")
        self._core.export_onnx(os.fspath(path), inputs)


def load_policy(path):
    """A policy file (.dqnpolicy), a run's directory (its best policy) or a sweep's directory
    (its winner's best policy)."""
    return Policy(_core.load_policy(os.fspath(path)))


def _settings_doc():
    rows = []
    for s in _core.settings():
        rows.append(f"    {s['name'].replace('-', '_')} = {s['default'] or '(empty)'}\n"
                    f"        {s['help']}")
    return "\n".join(rows)


train.__doc__ += "\n" + _settings_doc() + "\n"
