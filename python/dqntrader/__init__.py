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
    "report",
    "settings",
    "sweep",
    "synth",
    "train",
    "universe",
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


def _names(name, value):
    """A list of column names: one name (a str) or an iterable of them."""
    if isinstance(value, str):
        return [value]
    names = list(value)
    for item in names:
        if not isinstance(item, str):
            raise TypeError(f"{name}= takes column names (str), not {item!r}")
    return names


_TABLES = {t["command"]: t for t in _core.tables()}


def _text(name, value):
    """One value as the command line would give it: a flag true/false, a number in its
    shortest form, a path or a text as it is. The library checks it (ValueError naming it)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return repr(float(value))
    if isinstance(value, str):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"{name}= takes a number, a text or a path, not {value!r}")


def _given(command, arguments):
    """The keyword arguments of a command's function as the library's request reads them:
    each option's name as the command spells it (- for _) with its values as texts; a
    sequence is a repeatable option's values, or a list option's items. None: not given."""
    options = {o["name"]: o for o in _TABLES[command]["options"]}
    given = {}
    for name, value in arguments.items():
        if value is None:
            continue
        key = name.replace("_", "-")
        option = options.get(key, {})
        if isinstance(value, (list, tuple, np.ndarray)):
            items = [_text(name, item) for item in value]
            if option.get("repeatable"):
                if items:
                    given[key] = items
                continue
            if option.get("kind") == "list":
                given[key] = [",".join(items)]
                continue
            raise TypeError(f"{name}= takes one value, not {value!r}")
        given[key] = [_text(name, value)]
    return given


def _options_doc(command, settings=True):
    """The options of a command's table as a docstring's lines (name = default, help)."""
    rows = []
    for o in _TABLES[command]["options"]:
        if o["setting"] and not settings:
            continue
        default = o["default"] or "(none)"
        rows.append(f"    {o['name'].replace('-', '_')} = {default}\n        {o['help']}")
    return "\n".join(rows)


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
    def from_pandas(cls, df, *, columns=(), prefixes=(), source="DataFrame", symbol=""):
        """Bars from a DataFrame: a DatetimeIndex or a ``timestamp`` column; columns open,
        high, low, close, optionally volume and ofi, and the extra feature columns named in
        columns or starting with one of prefixes (others are ignored, as the CSV reader
        ignores them). A frame of several instruments (a ``symbol`` column, or a (timestamp,
        symbol) MultiIndex) gives the rows of symbol's, as the CSV reader does; without a
        symbol, its one instrument's (several raise ValueError naming two)."""
        columns, prefixes = _names("columns", columns), _names("prefixes", prefixes)
        df, source = _one_instrument(df, str(symbol), source)
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
                 if c not in _STANDARD_COLUMNS and c != "symbol"
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
    def from_file(cls, path, *, columns=(), prefixes=(), symbol=""):
        """Bars from a CSV file or a .dqnbars cache (by its extension), as ``dqntrader`` reads
        them; columns and prefixes choose the extra feature columns, symbol the instrument of
        a CSV file of several (one with a symbol column). A bad row raises ValueError
        "path:line:column: what"."""
        return cls(_core.Bars.from_file(os.fspath(path), _names("columns", columns),
                                        _names("prefixes", prefixes), str(symbol)))

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


def _one_instrument(df, symbol, source):
    """The rows of one instrument of a DataFrame of several (Bars.from_pandas), and its source
    as path[symbol]; a frame of one instrument as it is."""
    import pandas as pd
    multi = isinstance(df.index, pd.MultiIndex) and "symbol" in df.index.names
    if "symbol" in df.columns:
        symbols = df["symbol"].astype(str).to_numpy()
    elif multi:
        symbols = df.index.get_level_values("symbol").astype(str).to_numpy()
    else:
        return df, source
    held = list(dict.fromkeys(symbols))
    if not symbol:
        if len(held) > 1:
            raise ValueError(f"{source} holds several instruments ({held[0]!r}, {held[1]!r}, "
                             "...): choose one with symbol=")
        symbol = held[0] if held else ""
    chosen = symbols == symbol
    if not chosen.any():
        raise ValueError(f"{source}: no rows of symbol {symbol!r} (it holds "
                         f"{', '.join(repr(h) for h in held[:8])})")
    df = df[chosen]
    if multi:
        df = df.droplevel("symbol")
    return df, f"{source}[{symbol}]"


def synth(bars=None, **options):
    """The built-in synthetic market (``dqntrader synth``): daily bars with a planted signal in
    ofi that a policy can learn; the same options give the same bars on every machine. With
    symbols above 1, a dict of the instruments' Bars by symbol (S01, S02, ...).
    start may also be a datetime64 or a pandas Timestamp. Options:
    """
    options["start"] = _time(options.get("start"))
    made = _core.Bars.synth(_given("synth", dict(options, bars=bars)))
    if len(made) == 1:
        return Bars(made[0][1])
    return {symbol: Bars(core) for symbol, core in made}


def universe(data, *, columns=(), prefixes=()):
    """The instruments of a universe, a dict of :class:`Bars` by symbol in the order their
    symbols first appear: every instrument of a CSV file with a symbol column (a file without
    one, or a .dqnbars cache, is one instrument, under the symbol ""), or of a DataFrame of
    several (a ``symbol`` column, or a (timestamp, symbol) MultiIndex), each read as
    :meth:`Bars.from_file` and :meth:`Bars.from_pandas` read one. columns and prefixes choose
    the extra feature columns."""
    columns, prefixes = _names("columns", columns), _names("prefixes", prefixes)
    if isinstance(data, (str, os.PathLike)):
        return {symbol: Bars(core) for symbol, core in
                _core.Bars.panel_from_file(os.fspath(data), columns, prefixes)}
    import pandas as pd
    if not isinstance(data, pd.DataFrame):
        raise TypeError(f"data= takes a bar file's path or a DataFrame, not {type(data).__name__}")
    if "symbol" in data.columns:
        symbols = data["symbol"].astype(str)
    elif isinstance(data.index, pd.MultiIndex) and "symbol" in data.index.names:
        symbols = data.index.get_level_values("symbol").astype(str)
    else:
        return {"": Bars.from_pandas(data, columns=columns, prefixes=prefixes)}
    return {symbol: Bars.from_pandas(data, columns=columns, prefixes=prefixes, symbol=symbol)
            for symbol in dict.fromkeys(symbols)}


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


def train(bars=None, out=None, *, val_bars=None, test_bars=None, progress=None, log=True,
          **options):
    """Trains an agent (``dqntrader train``) and returns its :class:`Run`.

    bars: :class:`Bars` or a bar file's path (default: the built-in synthetic market);
    val_bars, test_bars: a separate validation or test window, likewise. Bars made in memory
    are stored once, by their fingerprint, as a .dqnbars file under $DQNTRADER_BARS_DIR
    (default ~/.cache/dqntrader/bars), which the run's config.json names.
    out: the run's directory (default runs/latest). progress: called as progress(epoch, epochs)
    after each epoch. log: True writes the run's lines to standard error, False nothing, a
    callable gets each line. options: the command's options and every training setting, by
    name (``_`` for ``-``); an unknown name or a bad value raises ValueError naming it. Ctrl-C
    raises KeyboardInterrupt at the next step; the run's last checkpoint stays valid, and
    ``train(resume=out)`` continues it bitwise.

    Options and settings with their defaults:
    """
    given = _given("train", _with_data(dict(options, out=out), bars, val_bars, test_bars))
    result = _core.train(given, progress, _log_target(log))
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
    """A set= value with the setting's name as the command spells it."""
    if not isinstance(text, str):
        raise TypeError(f"set= takes NAME=VALUES texts, not {text!r}")
    name, equals, values = text.partition("=")
    return name.replace("_", "-") + equals + values


def sweep(bars=None, out=None, *, val_bars=None, test_bars=None, log=True, **options):
    """Trains every member of a search space (``dqntrader sweep``) and returns its
    :class:`Sweep`.

    bars: :class:`Bars` or a bar file's path (required: on the built-in market the seed would
    choose the market too); out: the sweep's directory (required). set: settings to vary, as
    ``dqntrader sweep --set`` takes them ("gamma=0.9,0.99", "learning_rate=1e-4:1e-3:log"; one
    text or a list); seeds: "1-4" or a list. resume: continue the sweep in this directory (and
    nothing else). Ctrl-C stops the sweep at the next step (continue it with resume=).

    Options and settings with their defaults:
    """
    if "set" in options and options["set"] is not None:
        axes = options["set"]
        options["set"] = [_axis(axes)] if isinstance(axes, str) else [_axis(a) for a in axes]
    given = _given("sweep", _with_data(dict(options, out=out), bars, val_bars, test_bars))
    return Sweep(_core.sweep(given, _log_target(log)))


def report(run, out=None, *, data=None, log=False):
    """Writes the HTML report of a training run's or a sweep's directory (``dqntrader
    report``) and returns the file's path (default RUN/report.html). data: the bar file, when
    it has moved since training. log: as train()'s."""
    given = _given("report", {"run": os.fspath(run), "out": out, "data": data})
    return _core.report(given, _log_target(log))


# ---- backtests and policies -------------------------------------------------------------------


def _bars_of(bars, arguments):
    """Bars held in memory (their core), with the data option named after them, or None with
    the bar file's path as the data option: the library reads it with the columns the
    policies need, as the command reads --data."""
    if isinstance(bars, Bars):
        arguments["data"] = bars.source
        return bars._core
    if isinstance(bars, (str, os.PathLike)):
        arguments["data"] = os.fspath(bars)
        return None
    raise TypeError(f"bars= takes Bars or a bar file's path, not {type(bars).__name__}")


def _universe_of(bars, arguments):
    """Instruments held in memory as (symbol, core) pairs: a universe's dict of Bars by symbol,
    or Bars (one instrument, of symbol ""), with the data option named after them; or none, with
    the bar file's path as the data option (the library reads every instrument of it)."""
    if not isinstance(bars, dict):
        core = _bars_of(bars, arguments)
        return [] if core is None else [("", core)]
    for symbol, one in bars.items():
        if not isinstance(symbol, str) or not isinstance(one, Bars):
            raise TypeError("a universe is a dict of Bars by symbol (str)")
    if not bars:
        raise ValueError("bars= holds no instrument")
    arguments["data"] = next(iter(bars.values())).source
    return [(symbol, one._core) for symbol, one in bars.items()]


def _time(value):
    """A window's bound or a date as ``dqntrader`` takes it: a bar index or an ISO-8601 time
    (datetime64 values and pandas Timestamps are written as one)."""
    if value is None or isinstance(value, (str, bool, numbers.Integral)):
        return value
    try:
        return str(np.datetime64(value, "ms"))
    except (ValueError, TypeError):
        raise TypeError(f"a bar is an index or a time, not {value!r}") from None


def _paths(values):
    """One path or a sequence of them, as texts."""
    if isinstance(values, (str, os.PathLike)):
        values = [values]
    return [os.fspath(v) for v in values]


def backtest(bars, weights=(), policy=(), **options):
    """Backtests policy files (weights) and built-in policies (policy: "buy-and-hold", "flat",
    "sign-of-ofi"; one or a list) on bars, together (``dqntrader backtest``).

    bars: :class:`Bars`, a bar file's path (of a file of several instruments, every one, each
    on its own bars, unless symbol= chooses one), a list of bar files' paths (one universe, as
    ``--data`` given several times), or a universe: a dict of Bars by symbol (as
    :func:`universe` and :func:`synth` give), every instrument backtested as a file's are.
    start, end: the window's first and last bar (an index, or a time: the first bar at or
    after it, the last at or before it).
    Returns {"metrics": [...], "paths": [...]}: metrics as ``backtest --json`` writes them (one
    dict per policy and window: policy, window, metrics); paths one dict per policy and window
    with NumPy arrays, a row per bar return (as ``--returns``): bar, timestamp, position (held
    over the bar), return (net), equity (after it; 1 at the window's first bar). Of several
    instruments, each dict of either also names its symbol.

    Options with their defaults:
    """
    arguments = dict(options, weights=_paths(weights),
                     policy=[policy] if isinstance(policy, str) else list(policy))
    for bound in ("start", "end"):
        arguments[bound] = _time(arguments.get(bound))
    if isinstance(bars, (list, tuple)):  # several bar files: one universe
        arguments["data"] = _paths(bars)
        held = []
    else:
        held = _universe_of(bars, arguments)
    result = _core.backtest(held, _given("backtest", arguments))
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

    def act(self, bars, start=None, end=None, **options):
        """Decisions on bars (``dqntrader act``): at the latest bar alone (start and end None),
        or one per bar from start to end (an index or a time), each coming in with the position
        the one before took, the first with position ("flat", "long", "short" or a number).
        Returns a dict of NumPy arrays, one row per decision: bar, timestamp, incoming, q (one
        column per action), action, position (held from the next bar on). bars may hold several
        instruments (a file with a symbol column, or a universe's dict of Bars by symbol): then
        every instrument's decisions, each coming in with position on its own, in order, and a
        symbol column (unless symbol= chooses one).

        Options with their defaults:
        """
        arguments = dict(options, weights=self.path, start=_time(start), end=_time(end))
        held = _universe_of(bars, arguments)
        result = self._core.act(held, _given("act", arguments))
        result["timestamp"] = result.pop("timestamp_ms").astype("datetime64[ms]")
        if "symbol" in result:
            result = {"symbol": np.array(result.pop("symbol")), **result}
        return result

    def export_onnx(self, onnx, **options):
        """Writes the policy's whole decision as an ONNX model (``dqntrader export``) to the
        file onnx: each row's raw bars and incoming position in, its Q-values and action out.
        ValueError when onnx is the policy's own file.

        Options with their defaults:
        """
        if not hasattr(self._core, "export_onnx"):
            raise RuntimeError("this build has no ONNX export (built without "
                               "DQNTRADER_ENABLE_ONNX)")
        self._core.export_onnx(_given("export", dict(options, weights=self.path,
                                                      onnx=os.fspath(onnx))))


def load_policy(path):
    """A policy file (.dqnpolicy), a run's directory (its best policy) or a sweep's directory
    (its winner's best policy)."""
    return Policy(_core.load_policy(os.fspath(path)))


synth.__doc__ += "\n" + _options_doc("synth") + "\n"
train.__doc__ += "\n" + _options_doc("train") + "\n"
sweep.__doc__ += "\n" + _options_doc("sweep") + "\n"
backtest.__doc__ += "\n" + _options_doc("backtest") + "\n"
Policy.act.__doc__ += "\n" + _options_doc("act") + "\n"
if "export" in _TABLES:
    Policy.export_onnx.__doc__ += "\n" + _options_doc("export") + "\n"
