#!/usr/bin/env python3
"""Runs README.md's command blocks in order, as a reader following the document would, so that
the document cannot drift from the tool.

Usage: run_readme.py README.md CLI PYTHON PYTHONPATH NODE NODE_PATH

Every fenced block in sh, python or js runs, top to bottom, in one temporary directory that
is removed afterwards (the files one block writes are the next one's inputs, as for a reader):
sh blocks with bash -e -o pipefail, `dqn` set to the command (as the tour sets it) and the
command reachable as build/openmp/dqntrader; python blocks in PYTHON with the module on
PYTHONPATH; js blocks in NODE with NODE_PATH. A block is not run only where the line before
it says why, as an HTML comment that begins "<!-- not run:" (a build, an install, another
machine); the scripts such a block names must exist. The listing under "## Commands" must be
the command's own list of subcommands. Exit status 1 naming the block (its first line in
README.md) and what it printed when one fails.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

RUNNERS = {"sh", "python", "js"}
NOT_RUN = re.compile(r"^<!-- not run: (.+) -->$")


def blocks(text):
    """(line, language, body, reason not run or None) of every fenced block."""
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        start, language = i, fence.group(1)
        i += 1
        body = []
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        i += 1
        before = start - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        marker = NOT_RUN.match(lines[before].strip()) if before >= 0 else None
        out.append((start + 1, language, "\n".join(body) + "\n",
                    marker.group(1) if marker else None))
    return out


def subcommands(cli):
    """The subcommands `dqntrader --help` lists."""
    text = subprocess.run([cli, "--help"], capture_output=True, text=True).stdout
    names, listing = [], False
    for line in text.splitlines():
        if line.strip().startswith("Subcommands:"):
            listing = True
            continue
        if listing and line.strip():
            names.append(line.split()[0])
    return names


def main(argv):
    if len(argv) != 7:
        print(__doc__, file=sys.stderr)
        return 2
    readme, cli, python, pythonpath, node, node_path = argv[1:]
    root = os.path.dirname(os.path.abspath(readme))
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    failures, ran, skipped = [], 0, 0

    # The listing of the commands is the command's own.
    listing = text.split("## Commands", 1)[1].split("```", 2)[1]
    listed = [line.split()[0] for line in listing.splitlines()[1:] if line.startswith("  ")]
    if sorted(listed) != sorted(subcommands(cli)):
        failures.append(f"README's command list {sorted(listed)} is not `dqntrader --help`'s "
                        f"{sorted(subcommands(cli))}")

    work = tempfile.mkdtemp(prefix="dqntrader-readme-")
    try:
        os.makedirs(os.path.join(work, "build", "openmp"))
        os.symlink(cli, os.path.join(work, "build", "openmp", "dqntrader"))
        env = dict(os.environ, dqn="build/openmp/dqntrader", PYTHONPATH=pythonpath,
                   NODE_PATH=node_path, HOME=work)
        for number, (line, language, body, reason) in enumerate(blocks(text)):
            if language not in RUNNERS:
                continue
            first = body.strip().splitlines()[0] if body.strip() else ""
            if reason is not None:
                skipped += 1
                for script in re.findall(r"\bscripts/[\w./-]+\.sh\b", body):
                    if not os.path.exists(os.path.join(root, script)):
                        failures.append(f"README.md:{line}: names {script}, which does not exist")
                continue
            source = os.path.join(work, f"block-{number}." + {"sh": "sh", "python": "py",
                                                              "js": "js"}[language])
            with open(source, "w", encoding="utf-8") as f:
                f.write(body)
            command = {"sh": ["bash", "-e", "-o", "pipefail", source], "python": [python, source],
                       "js": [node, source]}[language]
            started = time.monotonic()
            result = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True,
                                    stdin=subprocess.DEVNULL, timeout=900)
            print(f"README.md:{line}: {first} ({time.monotonic() - started:.1f} s)", flush=True)
            ran += 1
            if result.returncode != 0:
                failures.append(f"README.md:{line}: {language} block ({first}) exited "
                                f"{result.returncode}\n{result.stdout[-3000:]}"
                                f"{result.stderr[-3000:]}")
                break  # the blocks after it read what it would have written
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for failure in failures:
        print(failure, file=sys.stderr)
    print(f"run_readme.py: {ran} blocks run, {skipped} not run (each saying why)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
