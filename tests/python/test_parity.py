"""The command and the module refuse alike, driven by the requests' tables (src/dqntrader/
request/): for every option of every request the two front ends share, the value its table
says is refused, and every pair of options it says cannot go together, give exit 2 from
`dqntrader` and ValueError from Python, with the same message but for how each spells the
option (--test-fraction, test_fraction=); no Python message spells a flag.

Run by CTest (tests/CMakeLists.txt) with PYTHONPATH at the build's package and DQNTRADER_CLI
the command built beside it; every file goes to pytest's temporary folders.
"""

import os
import re
import subprocess

import pytest

import dqntrader

CLI = os.path.abspath(os.environ["DQNTRADER_CLI"])
TABLES = {t["command"]: t for t in dqntrader._core.tables()}

# Settings that keep a run small should a refusal not come (the test would then fail, fast).
SMALL = {"epochs": "1", "steps-per-epoch": "2", "learning-starts": "32", "environments": "2",
         "batch-size": "8", "hidden": "8", "replay-capacity": "256", "synth-bars": "3000",
         "val-windows": "1", "checkpoints": "1"}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A bar file, a trained run, a directory and a file of no bars."""
    root = tmp_path_factory.mktemp("parity")
    subprocess.run([CLI, "synth", "--bars", "3000", "--seed", "5", "--out",
                    str(root / "bars.csv")], check=True, capture_output=True)
    subprocess.run([CLI, "train", "--data", str(root / "bars.csv"), "--out", str(root / "run"),
                    *[a for k, v in SMALL.items() for a in ("--" + k, v)]],
                   check=True, capture_output=True)
    (root / "dir").mkdir()
    (root / "file").write_text("not bars\n")
    return root


def base(command, files, tmp):
    """Options that make a request whole, the option under test aside."""
    if command in ("train", "sweep"):
        given = dict(SMALL)
        if command == "sweep":
            given.update({"data": str(files / "bars.csv"), "out": str(tmp / "sweep")})
        return given
    return {
        "backtest": {"data": str(files / "bars.csv"), "policy": "flat"},
        "act": {"weights": str(files / "run"), "data": str(files / "bars.csv")},
        "export": {"weights": str(files / "run"), "onnx": str(tmp / "m.onnx")},
        "synth": {},
        "report": {"run": str(files / "run"), "out": str(tmp / "report.html")},
    }[command]


def command_line(command, given, tmp):
    args = [command]
    table = {o["name"]: o for o in TABLES[command]["options"]}
    for name, value in given.items():
        if table.get(name, {}).get("positional"):
            args.append(value)
        elif table.get(name, {}).get("kind") == "flag":
            args.append(f"--{name}={value}")
        else:
            args += [f"--{name}", value]
    if command == "synth":
        args += ["--out", str(tmp / "synth.csv")]  # where the command writes; Python returns
    return args


def call_python(command, given):
    kwargs = {name.replace("-", "_"): value for name, value in given.items()}
    if command == "train":
        return dqntrader.train(log=False, **kwargs)
    if command == "sweep":
        return dqntrader.sweep(log=False, **kwargs)
    if command == "backtest":
        return dqntrader.backtest(kwargs.pop("data"), **kwargs)
    if command == "act":
        policy = dqntrader.load_policy(kwargs.pop("weights"))
        return policy.act(kwargs.pop("data"), **kwargs)
    if command == "export":
        policy = dqntrader.load_policy(kwargs.pop("weights"))
        return policy.export_onnx(kwargs.pop("onnx"), **kwargs)
    if command == "synth":
        return dqntrader.synth(**kwargs)
    if command == "report":
        return dqntrader.report(kwargs.pop("run"), **kwargs)
    raise AssertionError(command)


def as_python(message):
    """A command's message with its flags as Python spells the fields (--a-b -> a_b=)."""
    return re.sub(r"--([a-z][a-z0-9-]*)", lambda m: m.group(1).replace("-", "_") + "=", message)


def refused_alike(command, given, files, tmp, monkeypatch):
    """Both front ends refuse given: the message the command prints and Python's, compared."""
    monkeypatch.chdir(tmp)
    result = subprocess.run([CLI, *command_line(command, given, tmp)], cwd=tmp,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, (command_line(command, given, tmp), result.stderr)
    prefix = "dqntrader: error: "
    assert result.stderr.startswith(prefix), result.stderr
    message = result.stderr[len(prefix):].rstrip("\n")
    with pytest.raises(ValueError) as raised:
        call_python(command, given)
    python = str(raised.value)
    assert "--" not in python, python
    assert python == as_python(message)
    return message


def every_option():
    for command, table in TABLES.items():
        for option in table["options"]:
            yield pytest.param(command, option, id=f"{command}-{option['name']}")


def test_every_option_has_a_value_it_refuses():
    missing = [f"{c}: {o['name']}" for c, t in TABLES.items() for o in t["options"]
               if not o["refused"]]
    assert missing == []
    assert sorted(TABLES) == sorted(
        ["train", "sweep", "backtest", "act", "synth", "report"] +
        (["export"] if dqntrader.info()["onnx_export"] else []))


@pytest.mark.parametrize("command,option", every_option())
def test_a_refused_value_is_refused_alike(command, option, files, tmp_path, monkeypatch):
    given = base(command, files, tmp_path)
    if command == "sweep" and option["name"] == "resume":
        given = {}  # resume takes nothing else
    value = option["refused"].replace("{dir}", str(files / "dir")).replace(
        "{file}", str(files / "file"))
    given[option["name"]] = value
    message = refused_alike(command, given, files, tmp_path, monkeypatch)
    assert ("--" + option["name"] in message or value in message), message


def every_exclusion():
    for command, table in TABLES.items():
        for option, other in table["exclusions"]:
            yield pytest.param(command, option, other, id=f"{command}-{option}-{other}")


def valid(option):
    return {"whole": "1", "number": "1", "flag": "true"}.get(
        option["kind"], option["choices"][0] if option["choices"] else "x")


@pytest.mark.parametrize("command,option,other", every_exclusion())
def test_options_that_exclude_each_other_are_refused_alike(command, option, other, files, tmp_path,
                                                          monkeypatch):
    table = {o["name"]: o for o in TABLES[command]["options"]}
    if other == "*":
        other = next(name for name in table if name != option)
    given = {option: valid(table[option]), other: valid(table[other])}
    message = refused_alike(command, given, files, tmp_path, monkeypatch)
    assert "--" + option in message and "--" + other in message, message
