"""The Python module against the command: the same runs, metrics and decisions, the documented
errors, and a training run stopped by Ctrl-C that resumes bitwise.

Run by CTest (tests/CMakeLists.txt) with PYTHONPATH at the build's package and DQNTRADER_CLI
the command built beside it; every file goes to pytest's temporary folders.
"""

import _thread
import filecmp
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pandas as pd
import pytest

import dqntrader

CLI = os.path.abspath(os.environ["DQNTRADER_CLI"])

# A small run: seconds on two cores, every part of the loop taken (learning, the target
# update, validation, the test window).
SMALL = dict(epochs=2, steps_per_epoch=40, learning_starts=256, environments=16, batch_size=64,
             hidden=[16], replay_capacity=20000, seed=3)


def flags(settings):
    out = []
    for name, value in settings.items():
        text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        out += ["--" + name.replace("_", "-"), text]
    return out


def cli(*args, cwd=None, check=True):
    result = subprocess.run([CLI, *map(str, args)], cwd=cwd, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"dqntrader {' '.join(map(str, args))}: exit {result.returncode}\n"
                             f"{result.stderr}")
    return result


def sections(path):
    """A checkpoint's sections by name, read by the layout the header of
    src/dqntrader/io/checkpoint_file.hpp documents."""
    data = open(path, "rb").read()
    assert data[:8] == b"DQNCKPT\0"
    version, count = struct.unpack_from("<II", data, 8)
    assert version == 2
    at, out = 16, {}
    for _ in range(count):
        (length,) = struct.unpack_from("<H", data, at)
        name = data[at + 2:at + 2 + length].decode()
        at += 2 + length
        size, _checksum = struct.unpack_from("<QQ", data, at)
        at += 16
        out[name] = data[at:at + size]
        at += size
    assert at + 8 == len(data)
    return out


def same_run(a, b):
    """Two run directories hold the same run: every file byte for byte, the checkpoints section
    by section, but the wall-clock timings (timings.jsonl, and its copy in each checkpoint)."""
    names = sorted(os.listdir(a))
    assert names == sorted(os.listdir(b))
    for name in names:
        if name == "timings.jsonl":
            continue
        if name.endswith(".dqnckpt"):
            left, right = sections(os.path.join(a, name)), sections(os.path.join(b, name))
            assert sorted(left) == sorted(right), name
            for key in left:
                if not key.startswith("timings.jsonl"):
                    assert left[key] == right[key], f"{name}: section {key}"
            continue
        assert filecmp.cmp(os.path.join(a, name), os.path.join(b, name), shallow=False), name


@pytest.fixture(scope="module")
def market(tmp_path_factory):
    """A bar file written by `dqntrader synth`, and a run trained on it by the command."""
    root = tmp_path_factory.mktemp("market")
    cli("synth", "--bars", 3000, "--seed", 5, "--out", root / "bars.csv")
    cli("train", "--data", root / "bars.csv", *flags(SMALL), "--out", root / "run")
    os.rename(root / "run", root / "cli-run")
    return root


@pytest.fixture(autouse=True)
def bars_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("DQNTRADER_BARS_DIR", str(tmp_path / "bars-cache"))


def test_info_names_the_backend_it_was_built_with():
    info = dqntrader.info()
    built = cli("--version").stdout
    assert info["backend"] in ("openmp", "cuda")
    assert f"backend {info['backend']}" in built
    assert info["version"] in built


def test_a_run_trained_from_python_is_the_commands(market):
    run = dqntrader.train(str(market / "bars.csv"), out=str(market / "run"), log=False, **SMALL)
    try:
        same_run(market / "cli-run", run.dir)
        records = run.records
        assert list(records["epoch"]) == [1, 2]
        final = json.load(open(market / "cli-run" / "final_metrics.json"))
        assert run.final_metrics == final
        assert run.test["best"]["sharpe"] == final["test"]["best"]["sharpe"]
    finally:
        os.rename(market / "run", market / "py-run")


def test_bars_in_memory_train_as_the_file_does(market):
    bars = dqntrader.Bars.from_file(market / "bars.csv")
    run = dqntrader.train(bars, out=str(market / "memory-run"), log=False, **SMALL)
    for name in ("metrics.jsonl", "best.dqnpolicy", "baselines.json"):
        assert filecmp.cmp(market / "cli-run" / name, os.path.join(run.dir, name),
                           shallow=False), name
    # The run names the stored bars, which hold the same values as the file.
    stored = run.config["data"]
    assert stored.endswith(bars.fingerprint + ".dqnbars")
    assert dqntrader.Bars.from_file(stored).fingerprint == bars.fingerprint


def test_from_pandas_of_a_csv_is_from_file(market):
    frame = pd.read_csv(market / "bars.csv", float_precision="round_trip")
    by_column = dqntrader.Bars.from_pandas(frame)
    by_index = dqntrader.Bars.from_pandas(
        frame.set_index(pd.to_datetime(frame.pop("timestamp"))))
    from_file = dqntrader.Bars.from_file(market / "bars.csv")
    assert by_column.fingerprint == from_file.fingerprint
    assert by_index.fingerprint == from_file.fingerprint
    np.testing.assert_array_equal(from_file.close, frame["close"].to_numpy())
    back = from_file.to_pandas()
    assert list(back.columns[:4]) == ["open", "high", "low", "close"]
    assert dqntrader.Bars.from_pandas(back).fingerprint == from_file.fingerprint


def test_a_backtest_is_the_commands_json_and_returns(market, tmp_path):
    policy = market / "cli-run" / "best.dqnpolicy"
    cli("backtest", "--data", market / "bars.csv", "--weights", policy, "--policy",
        "buy-and-hold", "--windows", 2, "--start", 100, "--json", tmp_path / "m.json",
        "--returns", tmp_path / "r.csv")
    bars = dqntrader.Bars.from_file(market / "bars.csv")
    result = dqntrader.backtest(bars, weights=[str(policy)], policy=["buy-and-hold"],
                                windows=2, start=100)
    assert result["metrics"] == json.load(open(tmp_path / "m.json"))
    returns = pd.read_csv(tmp_path / "r.csv", float_precision="round_trip")
    for path in result["paths"]:
        rows = returns[returns["window"] == path["window"]]
        np.testing.assert_array_equal(path["bar"], rows["bar"].to_numpy())
        for column in ("position", "return", "equity"):
            np.testing.assert_array_equal(path[column],
                                          rows[f"{path['policy']}:{column}"].to_numpy())


def test_policy_act_is_the_commands_act(market, tmp_path):
    path = market / "cli-run" / "best.dqnpolicy"
    policy = dqntrader.load_policy(market / "cli-run")
    assert policy.path.endswith("best.dqnpolicy")
    bars = dqntrader.Bars.from_file(market / "bars.csv")
    made = policy.act(bars, start=2000, end=2100, position="long")
    lines = cli("act", "--weights", path, "--data", market / "bars.csv", "--start", 2000, "--end",
                2100, "--position", "long", "--json").stdout.splitlines()
    expected = [json.loads(line) for line in lines]
    assert len(expected) == len(made["bar"]) == 101
    np.testing.assert_array_equal(made["bar"], [e["bar"] for e in expected])
    np.testing.assert_array_equal(made["q"], np.array([e["q"] for e in expected], np.float32))
    np.testing.assert_array_equal(made["action"], [e["action"] for e in expected])
    np.testing.assert_array_equal(made["position"], [e["position"] for e in expected])
    latest = policy.act(bars)
    assert list(latest["bar"]) == [len(bars) - 1]


def test_policy_act_over_a_universe_is_the_commands(market, tmp_path):
    policy = dqntrader.load_policy(market / "cli-run")
    cli("synth", "--bars", 600, "--seed", 8, "--symbols", 3, "--out", tmp_path / "u.csv")
    lines = cli("act", "--weights", policy.path, "--data", tmp_path / "u.csv", "--start",
                "2001-03-01", "--json").stdout.splitlines()
    expected = [json.loads(line) for line in lines]
    for held in (tmp_path / "u.csv", dqntrader.universe(tmp_path / "u.csv")):
        made = policy.act(held, start="2001-03-01")
        assert list(made)[0] == "symbol"
        assert list(made["symbol"]) == [e["symbol"] for e in expected]
        np.testing.assert_array_equal(made["bar"], [e["bar"] for e in expected])
        np.testing.assert_array_equal(made["q"], np.array([e["q"] for e in expected], np.float32))
        np.testing.assert_array_equal(made["position"], [e["position"] for e in expected])
    one = policy.act(tmp_path / "u.csv", symbol="S02")
    assert "symbol" not in one and list(one["bar"]) == [599]


def test_export_onnx_writes_the_commands_model(market, tmp_path):
    if not dqntrader.info()["onnx_export"]:
        pytest.skip("built without DQNTRADER_ENABLE_ONNX")
    path = market / "cli-run" / "best.dqnpolicy"
    cli("export", "--onnx", tmp_path / "cli.onnx", "--weights", path)
    dqntrader.load_policy(path).export_onnx(tmp_path / "py.onnx")
    assert filecmp.cmp(tmp_path / "cli.onnx", tmp_path / "py.onnx", shallow=False)


def test_bad_bars_raise_value_error_naming_the_bar_and_column():
    t = np.datetime64("1970-01-01", "ms") + np.arange(5) * np.timedelta64(1, "D")
    price = np.full(5, 100.0)
    high = price.copy()
    high[3] = 99.0
    with pytest.raises(ValueError, match=r"bar 3 \(1970-01-04.*column 'high': high 99 is below"):
        dqntrader.Bars.from_arrays(t, price, high, price, price)
    close = price.copy()
    close[2] = np.nan
    with pytest.raises(ValueError, match=r"bar 2 .*column 'close': NaN"):
        dqntrader.Bars.from_arrays(t, price, price, price, close)
    with pytest.raises(ValueError, match=r"bar 1 .*column 'timestamp'"):
        dqntrader.Bars.from_arrays(t[::-1], price, price, price, price)
    with pytest.raises(ValueError, match=r"column 'low' holds 4 values"):
        dqntrader.Bars.from_arrays(t, price, price, price[:4], price)


def test_a_corrupt_csv_row_names_line_and_column(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("timestamp,open,high,low,close\n2024-01-01,1,2,0.5,1.5\n2024-01-02,1,x,1,1\n")
    with pytest.raises(ValueError, match=r"bad.csv:3:"):
        dqntrader.Bars.from_file(path)


def test_bad_settings_and_windows_raise_and_write_nothing(market, tmp_path):
    with pytest.raises(ValueError, match="train has no option no_such_setting="):
        dqntrader.train(out=str(tmp_path / "a"), no_such_setting=1, log=False)
    with pytest.raises(ValueError, match="gamma"):
        dqntrader.train(out=str(tmp_path / "b"), gamma=1.5, log=False)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    bars = dqntrader.Bars.from_file(market / "bars.csv")
    with pytest.raises(ValueError, match=r"start= 5000: the data has bars 0 \.\. 2999"):
        dqntrader.backtest(bars, policy=["flat"], start=5000)
    with pytest.raises(ValueError, match=r"end= 1990-01-01 comes before the data's first bar"):
        dqntrader.load_policy(market / "cli-run").act(bars, start=100, end="1990-01-01")
    with pytest.raises(ValueError, match="position= .sideways.: expected a position"):
        dqntrader.load_policy(market / "cli-run").act(bars, position="sideways")


def test_keyboard_interrupt_between_epochs_leaves_a_run_that_resumes_bitwise(market, tmp_path):
    settings = dict(SMALL, epochs=3)
    reference = dqntrader.train(str(market / "bars.csv"), out=str(tmp_path / "run"), log=False,
                                **settings)
    os.rename(reference.dir, tmp_path / "reference")

    # After the first epoch's checkpoint a thread sends Ctrl-C (as a terminal would); the
    # callback returns only once it has, so that the run stops between epochs.
    epoch_done, sent = threading.Event(), threading.Event()

    def interrupter():
        epoch_done.wait()
        _thread.interrupt_main()
        sent.set()

    def progress(epoch, epochs):
        if epoch == 1:
            epoch_done.set()
            sent.wait()

    helper = threading.Thread(target=interrupter)
    helper.start()
    with pytest.raises(KeyboardInterrupt):
        dqntrader.train(str(market / "bars.csv"), out=str(tmp_path / "run"), log=False,
                        progress=progress, **settings)
    helper.join()
    assert not (tmp_path / "run" / "final_metrics.json").exists()
    assert (tmp_path / "run" / "checkpoint-1.dqnckpt").exists()
    assert not (tmp_path / "run" / "checkpoint-2.dqnckpt").exists()
    dqntrader.train(resume=str(tmp_path / "run"), log=False)
    same_run(tmp_path / "reference", tmp_path / "run")


def test_keyboard_interrupt_within_an_epoch_leaves_a_run_that_resumes_bitwise(market, tmp_path):
    # The library asks Python for signals between steps (src/dqntrader/train/dqn_trainer.cpp,
    # run_epoch), which runs Python's handlers there. A handler for SIGUSR1 that puts the
    # signal back until the library has asked twice since the first epoch ended raises
    # KeyboardInterrupt at a step of the second epoch after at least one step of it: the
    # second ask comes after a step. (Handled inside the progress callback, where Python code
    # is running, the signal is only put back.) The epoch is long enough for both asks.
    settings = dict(SMALL, epochs=2, steps_per_epoch=20000)
    reference = dqntrader.train(str(market / "bars.csv"), out=str(tmp_path / "run"), log=False,
                                **settings)
    os.rename(reference.dir, tmp_path / "reference")

    asks = []

    def progress(epoch, epochs):
        if epoch == 1:
            signal.raise_signal(signal.SIGUSR1)

    def on_signal(signum, frame):
        if frame is not None and frame.f_code is progress.__code__:
            signal.raise_signal(signal.SIGUSR1)  # for the library's next ask
            return
        asks.append(signum)
        if len(asks) < 2:
            signal.raise_signal(signal.SIGUSR1)
            return
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGUSR1, on_signal)
    try:
        with pytest.raises(KeyboardInterrupt):
            dqntrader.train(str(market / "bars.csv"), out=str(tmp_path / "run"), log=False,
                            progress=progress, **settings)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert len(asks) == 2
    assert not (tmp_path / "run" / "final_metrics.json").exists()
    assert (tmp_path / "run" / "checkpoint-1.dqnckpt").exists()
    assert not (tmp_path / "run" / "checkpoint-2.dqnckpt").exists()  # stopped within epoch 2
    assert len(open(tmp_path / "run" / "metrics.jsonl").read().splitlines()) == 1
    dqntrader.train(resume=str(tmp_path / "run"), log=False)
    same_run(tmp_path / "reference", tmp_path / "run")


def test_a_second_thread_is_refused_with_a_clear_error():
    dqntrader.info()  # the device is started from this thread
    caught = []

    def call():
        try:
            dqntrader.info()
        except RuntimeError as e:
            caught.append(str(e))

    worker = threading.Thread(target=call)
    worker.start()
    worker.join()
    assert caught and "thread other than the one that first used it" in caught[0]


def test_a_sweep_ranks_its_members_and_its_winner_acts(market, tmp_path):
    sweep = dqntrader.sweep(str(market / "bars.csv"), out=str(tmp_path / "sweep"),
                            set=["gamma=0.8,0.9"], seeds=[1, 2], log=False,
                            **dict(SMALL, seed=1))
    board = sweep.leaderboard
    assert len(board["members"]) == 4
    assert sorted(m["rank"] for m in board["members"]) == [1, 2, 3, 4]
    assert "deflated_sharpe" in sweep.selection
    winner = sweep.winner()
    first = board["members"][0]["run"]
    assert winner.path == os.path.join(str(tmp_path / "sweep"), first, "best.dqnpolicy")
    bars = dqntrader.Bars.from_file(market / "bars.csv")
    assert len(winner.act(bars, start=2990)["bar"]) == 10


def test_keyboard_interrupt_stops_a_sweep_that_resumes_to_the_same_leaderboard(market, tmp_path):
    settings = dict(SMALL, seed=1, epochs=3, steps_per_epoch=10000)
    common = dict(set=["gamma=0.8,0.9"], log=False, **settings)
    dqntrader.sweep(str(market / "bars.csv"), out=str(tmp_path / "reference"), **common)

    # Ctrl-C once the population's first checkpoint is written: the two epochs left (a second
    # or two here) stop at the next step.
    def interrupter():
        while not list((tmp_path / "sweep").glob("**/checkpoint-1.dqnckpt")):
            time.sleep(0.001)
        _thread.interrupt_main()
        sent.set()

    sent = threading.Event()
    helper = threading.Thread(target=interrupter)
    helper.start()
    with pytest.raises(KeyboardInterrupt):
        dqntrader.sweep(str(market / "bars.csv"), out=str(tmp_path / "sweep"), **common)
        sent.wait()  # not reached when the sweep was stopped; else the interrupt comes here
    helper.join()
    assert not (tmp_path / "sweep" / "leaderboard.json").exists()
    dqntrader.sweep(resume=str(tmp_path / "sweep"), log=False)
    ranked = lambda path: [(m["run"], m["validation_sharpe"], m["test_sharpe"])
                           for m in json.load(open(path / "leaderboard.json"))["members"]]
    assert ranked(tmp_path / "sweep") == ranked(tmp_path / "reference")
    for member in json.load(open(tmp_path / "reference" / "leaderboard.json"))["members"]:
        name = os.path.join(member["run"], "metrics.jsonl")
        assert filecmp.cmp(tmp_path / "reference" / name, tmp_path / "sweep" / name,
                           shallow=False), name


def test_help_lists_every_setting_with_its_default():
    doc = dqntrader.train.__doc__
    for setting in dqntrader.settings():
        assert f"{setting['name'].replace('-', '_')} = " in doc
    assert "steps_per_epoch = 1000" in doc


def test_synth_is_the_commands_market(tmp_path):
    cli("synth", "--bars", 500, "--seed", 9, "--out", tmp_path / "s.csv")
    assert (dqntrader.synth(500, seed=9).fingerprint ==
            dqntrader.Bars.from_file(tmp_path / "s.csv").fingerprint)


def test_a_universe_is_the_commands_each_symbol_from_its_file(tmp_path):
    cli("synth", "--bars", 400, "--seed", 9, "--symbols", 3, "--out", tmp_path / "u.csv")
    universe = dqntrader.synth(400, seed=9, symbols=3)
    assert sorted(universe) == ["S01", "S02", "S03"]
    for symbol, bars in universe.items():
        assert (bars.fingerprint ==
                dqntrader.Bars.from_file(tmp_path / "u.csv", symbol=symbol).fingerprint)
    with pytest.raises(ValueError, match=r"u.csv:3:\d+: the file holds several instruments"):
        dqntrader.Bars.from_file(tmp_path / "u.csv")
    with pytest.raises(ValueError, match="symbol= 'a b' cannot name an instrument"):
        dqntrader.Bars.from_file(tmp_path / "u.csv", symbol="a b")


def test_a_universe_backtests_every_instrument_as_its_symbol_alone(tmp_path):
    cli("synth", "--bars", 500, "--seed", 5, "--symbols", 3, "--out", tmp_path / "u.csv")
    both = ["buy-and-hold", "sign-of-ofi"]
    every = dqntrader.backtest(tmp_path / "u.csv", policy=both, start="2000-03-01", windows=2)
    assert [m["symbol"] for m in every["metrics"]] == ["S01"] * 4 + ["S02"] * 4 + ["S03"] * 4
    for i, symbol in enumerate(["S01", "S02", "S03"]):
        alone = dqntrader.backtest(tmp_path / "u.csv", policy=both, start="2000-03-01",
                                   windows=2, symbol=symbol)
        for got, want in zip(every["metrics"][4 * i:4 * i + 4], alone["metrics"]):
            assert got == dict(want, symbol=symbol)
        for got, want in zip(every["paths"][4 * i:4 * i + 4], alone["paths"]):
            assert got["symbol"] == symbol and "symbol" not in want
            for key in ("policy", "window"):
                assert got[key] == want[key]
            for key in ("bar", "timestamp", "position", "return", "equity"):
                np.testing.assert_array_equal(got[key], want[key])
    # The universe in memory (read from the file, from its frame, made by synth) is the file's.
    long = pd.read_csv(tmp_path / "u.csv", float_precision="round_trip")
    for held in (dqntrader.universe(tmp_path / "u.csv"), dqntrader.universe(long),
                 dqntrader.synth(500, seed=5, symbols=3)):
        assert list(held) == ["S01", "S02", "S03"]
        again = dqntrader.backtest(held, policy=both, start="2000-03-01", windows=2)
        assert again["metrics"] == every["metrics"]
    with pytest.raises(TypeError, match="a dict of Bars by symbol"):
        dqntrader.backtest({"S01": tmp_path / "u.csv"}, policy=both)
    # A file an instrument, named by its stem, make the same universe.
    for symbol in ("S01", "S02", "S03"):
        cli("cache", "--data", tmp_path / "u.csv", "--symbol", symbol,
            "--out", tmp_path / f"{symbol}.dqnbars")
    files = dqntrader.backtest([tmp_path / f"{s}.dqnbars" for s in ("S01", "S02", "S03")],
                               policy=both, start="2000-03-01", windows=2)
    assert files["metrics"] == every["metrics"]


def test_a_frame_of_several_instruments_gives_the_chosen_ones_rows(tmp_path):
    cli("synth", "--bars", 300, "--seed", 4, "--symbols", 3, "--out", tmp_path / "u.csv")
    long = pd.read_csv(tmp_path / "u.csv", float_precision="round_trip")
    indexed = long.assign(timestamp=pd.to_datetime(long["timestamp"])).set_index(
        ["timestamp", "symbol"])
    for symbol in ("S01", "S03"):
        from_file = dqntrader.Bars.from_file(tmp_path / "u.csv", symbol=symbol)
        for frame in (long, indexed):
            bars = dqntrader.Bars.from_pandas(frame, symbol=symbol)
            assert bars.fingerprint == from_file.fingerprint
            assert bars.source == f"DataFrame[{symbol}]"
    with pytest.raises(ValueError, match="holds several instruments \\('S01', 'S02'"):
        dqntrader.Bars.from_pandas(long)
    # Every instrument at once, in the order of their first rows, each as its symbol's.
    for held in (dqntrader.universe(long), dqntrader.universe(indexed),
                 dqntrader.universe(tmp_path / "u.csv")):
        assert list(held) == ["S01", "S02", "S03"]
        for symbol, bars in held.items():
            assert bars.fingerprint == dqntrader.Bars.from_file(tmp_path / "u.csv",
                                                                symbol=symbol).fingerprint
    assert list(dqntrader.universe(long[long["symbol"] == "S02"].drop(columns="symbol"))) == [""]
    with pytest.raises(ValueError, match="no rows of symbol 'S9'"):
        dqntrader.Bars.from_pandas(indexed, symbol="S9")


def run_python(code, timeout=120):
    """code in a fresh interpreter with this module's path; its exit status and output."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ))


def test_configure_bounds_threads_and_devices():
    for call, message in (("threads=0", "threads=0: from 1"),
                          ("threads=10**6", "threads= 1000000: host threads go from 1 to"),
                          ("device=-2", "device=-2: from 0"),
                          ("threads='2'", "threads= takes a whole number")):
        result = run_python(f"import dqntrader\ndqntrader.configure({call})\ndqntrader.info()")
        assert result.returncode != 0, call
        assert message in result.stderr, result.stderr


def test_the_interpreter_exits_while_a_daemon_thread_trains(market):
    # The main thread ends while a daemon thread's training run is in the library: the exit
    # stops the run at its next step and finishes within the timeout (it used to deadlock).
    code = f"""
import threading, dqntrader
started = threading.Event()
def work():
    dqntrader.train({str(market / "bars.csv")!r}, out={str(market / "daemon-run")!r},
                    log=lambda line: started.set(), epochs=50, steps_per_epoch=100000,
                    hidden=[16], environments=16, batch_size=64, replay_capacity=20000)
threading.Thread(target=work, daemon=True).start()
started.wait()
"""
    result = run_python(code, timeout=300)
    assert result.returncode == 0, result.stderr


def test_an_exception_of_the_log_callable_stops_the_run_and_comes_out(market, tmp_path):
    class Refused(Exception):
        pass

    lines = []

    def log(line):
        lines.append(line)
        if len(lines) == 2:
            raise Refused("no more lines")

    with pytest.raises(Refused, match="no more lines"):
        dqntrader.train(str(market / "bars.csv"), out=str(tmp_path / "run"), log=log,
                        **dict(SMALL, epochs=4))
    assert len(lines) == 2
    assert not (tmp_path / "run" / "final_metrics.json").exists()


def test_integer_timestamps_are_read_as_the_csv_reader_reads_them(tmp_path):
    rows = 5
    seconds = 1_700_000_000 + 60 * np.arange(rows)
    lines = ["timestamp,open,high,low,close"] + [f"{t},1,2,0.5,1.5" for t in seconds]
    (tmp_path / "s.csv").write_text("\n".join(lines) + "\n")
    from_file = dqntrader.Bars.from_file(tmp_path / "s.csv")
    expected = (seconds * 1000).astype("datetime64[ms]")
    for unit in (seconds, seconds * 1000):
        frame = pd.DataFrame({"timestamp": unit, "open": 1.0, "high": 2.0, "low": 0.5,
                              "close": 1.5})
        bars = dqntrader.Bars.from_pandas(frame)
        np.testing.assert_array_equal(bars.timestamp, expected)
        assert bars.fingerprint == from_file.fingerprint
        arrays = dqntrader.Bars.from_arrays(unit, *[frame[c] for c in ("open", "high", "low",
                                                                        "close")])
        np.testing.assert_array_equal(arrays.timestamp, expected)


def test_bars_in_memory_are_checked_as_a_file_is(tmp_path):
    t = np.datetime64("2024-01-01", "ms") + np.arange(5) * np.timedelta64(1, "D")
    price = np.full(5, 100.0)
    for times, message in ((np.concatenate([[np.datetime64("NaT")], t[1:]]), r"bar 0, column "
                            r"'timestamp': missing \(NaT\)"),
                           (np.concatenate([t[:3], [np.datetime64("NaT")], t[4:]]),
                            r"bar 3, column 'timestamp': missing \(NaT\)"),
                           (t + np.timedelta64(3_000_000, "D"), "outside the years 0000 to "
                            "9999")):
        with pytest.raises(ValueError, match=message):
            dqntrader.Bars.from_arrays(times, price, price, price, price)
    huge = price.copy()
    huge[2] = 1e39
    with pytest.raises(ValueError, match=r"bar 2 .*column 'high': value .* overflows float"):
        dqntrader.Bars.from_arrays(t, price, huge, price, price)
    with pytest.raises(ValueError, match="column name is not UTF-8"):
        dqntrader.Bars.from_file(_csv_with_column(tmp_path, b"f_\xff"), prefixes=["f_"])
    bars = dqntrader.Bars.from_arrays(t, price, price, price, price)
    for begin, end, message in ((5, 2, r"slice\(5, 2\)"), (0, 6, r"slice\(0, 6\)"),
                                (-1, 3, "begin=-1")):
        with pytest.raises(ValueError, match=message):
            bars.slice(begin, end)


def _csv_with_column(tmp_path, name):
    path = tmp_path / "named.csv"
    path.write_bytes(b"timestamp,open,high,low,close," + name + b"\n" +
                     b"".join(b"2024-01-%02d,1,2,0.5,1.5,%d\n" % (d, d) for d in range(1, 30)))
    return path


def test_the_command_refuses_a_column_name_that_is_not_utf8(tmp_path):
    path = _csv_with_column(tmp_path, b"f_\xff")
    result = cli("backtest", "--data", path, "--policy", "flat", check=False)
    assert result.returncode == 0  # a column nobody selects is not read
    result = subprocess.run([CLI, "cache", "--data", str(path), "--out", str(tmp_path / "c.dqnbars"),
                             "--feature-prefix", "f_"], capture_output=True)
    assert result.returncode == 2
    assert b"named.csv:1:31: column name is not UTF-8 text: f_\\xFF" in result.stderr


def test_arguments_out_of_range_raise_naming_the_argument(market, tmp_path):
    bars = dqntrader.Bars.from_file(market / "bars.csv")
    policy = dqntrader.load_policy(market / "cli-run")
    cases = [
        (lambda: dqntrader.train(out=str(tmp_path / "a"), learning_rate=float("nan"), log=False),
         ValueError, "learning_rate= must be a finite number, not nan"),
        (lambda: dqntrader.sweep(bars, out=str(tmp_path / "s"), random=-1), ValueError,
         "random= '-1' is not a whole number"),
        (lambda: dqntrader.backtest(bars, policy="flat", windows=-1), ValueError,
         "windows= '-1' is not a whole number"),
        (lambda: policy.act(bars, chunk_bars=-1), ValueError, "chunk_bars= '-1' is not a whole number"),
        (lambda: policy.act(bars, chunk_bars=0), ValueError, "chunk_bars= '0' is below 1"),
        (lambda: dqntrader.synth(-1), ValueError, "bars= '-1' is not a whole number"),
        (lambda: bars.slice(-1, 3), ValueError, "begin=-1"),
        (lambda: dqntrader.backtest(42, policy="flat"), TypeError, "bars= takes Bars"),
        (lambda: dqntrader.Bars.from_pandas(bars.to_pandas(), columns=["ofi"]), ValueError,
         "'ofi' is a standard column"),
    ]
    for call, kind, message in cases:
        with pytest.raises(kind, match=message):
            call()
    assert not (tmp_path / "a").exists() and not (tmp_path / "s").exists()
    # A path is read as the command reads --data.
    by_path = dqntrader.backtest(str(market / "bars.csv"), policy="buy-and-hold")
    assert by_path["metrics"] == dqntrader.backtest(bars, policy="buy-and-hold")["metrics"]


def test_column_names_are_names_not_strings_of_characters(tmp_path):
    frame = dqntrader.synth(300).to_pandas()
    frame["f_mom"] = np.linspace(0, 1, len(frame))
    frame["ofi2"] = 1.0
    frame["timestamp_ms"] = 7.0
    one = dqntrader.Bars.from_pandas(frame, columns="f_mom")
    assert list(one.features) == ["f_mom"]
    assert list(dqntrader.Bars.from_pandas(frame, columns="ofi2").features) == ["ofi2"]
    one.save(tmp_path / "one.csv")
    assert list(dqntrader.Bars.from_file(tmp_path / "one.csv", columns="f_mom").features) == \
        ["f_mom"]
    # An extra column named timestamp_ms stays a column; the index stays the times.
    named = dqntrader.Bars.from_pandas(frame, columns=["timestamp_ms"])
    back = named.to_pandas()
    np.testing.assert_array_equal(back.index.to_numpy(), frame.index.to_numpy())
    np.testing.assert_array_equal(back["timestamp_ms"].to_numpy(), 7.0)


def test_an_exported_model_never_replaces_its_policy(market, tmp_path):
    if not dqntrader.info()["onnx_export"]:
        pytest.skip("built without DQNTRADER_ENABLE_ONNX")
    path = tmp_path / "p.dqnpolicy"
    path.write_bytes((market / "cli-run" / "best.dqnpolicy").read_bytes())
    before = path.read_bytes()
    policy = dqntrader.load_policy(path)
    with pytest.raises(ValueError, match="would destroy the policy"):
        policy.export_onnx(policy.path)
    assert path.read_bytes() == before
    with pytest.raises(ValueError, match="inputs= 'float16'"):
        policy.export_onnx(tmp_path / "m.onnx", inputs="float16")


def test_a_report_is_the_commands_file_for_file(market, tmp_path):
    run = market / "cli-run"
    cli("report", run, "--out", tmp_path / "command.html")
    written = dqntrader.report(run, out=tmp_path / "module.html")
    assert written == str(tmp_path / "module.html")
    assert (tmp_path / "module.html").read_bytes() == (tmp_path / "command.html").read_bytes()
    assert b"<svg" in (tmp_path / "module.html").read_bytes()
