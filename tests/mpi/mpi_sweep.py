#!/usr/bin/env python3
"""dqntrader sweep under mpiexec, against the same sweep on one rank.

    mpi_sweep.py DQNTRADER_CLI FAILING_IO_LIBRARY WORK_DIR MPIEXEC NUMPROC_FLAG [PREFLAG...]

CMake's FindMPI gives MPIEXEC (MPIEXEC_EXECUTABLE), NUMPROC_FLAG (MPIEXEC_NUMPROC_FLAG) and the
flags before the program (MPIEXEC_PREFLAGS; with Open MPI, tests/CMakeLists.txt adds
--oversubscribe so that 2 ranks may share fewer cores).

1. A sweep of 8 members in 4 populations on 2 ranks (one thread each) ends with the
   leaderboard, sweep.json and every member's run directory bitwise those of one rank (the
   paths of the output directory aside).
2. The same sweep with one rank stopped at the rename of the last population's second
   checkpoint (tests/tools/failing_io.c raises SIGSTOP there) and killed: mpiexec ends with a
   failure; --resume on 2 ranks finishes, equals the uninterrupted sweep bitwise, and runs
   exactly the populations sweep.json did not record as finished (their members' files are
   not written again).
3. Ranks given different output directories (as on file systems they do not share) fail at
   the start with a message naming the problem and leave nothing behind.
4. The sweep with population based training (--schedule pbt, each population of 2 deciding
   within itself every epoch) on 2 ranks equals it on one rank bitwise, and members copied.
5. A population whose checkpoints cannot be written (tests/tools/failing_io.c: EIO) fails on
   whichever rank trains it while the others go on: the sweep ends, its members are marked
   failed in the leaderboard (the rank and the reason named) and the population is left
   unfinished; --resume trains it alone and the sweep equals the uninterrupted one bitwise.

Runs as root with Open MPI's consent variables.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

FILES = ("metrics.jsonl", "best.dqnpolicy", "last.dqnpolicy", "final_metrics.json",
         "baselines.json", "config.json")


def fail(message):
    sys.exit("mpi_sweep: FAIL: " + message)


def main():
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    cli, failing_io, work, mpiexec, numproc_flag = sys.argv[1:6]
    preflags = sys.argv[6:]
    if shutil.which(mpiexec) is None:
        fail("no %s (CMake's MPIEXEC_EXECUTABLE)" % mpiexec)

    def launch(ranks):
        return [mpiexec] + preflags + [numproc_flag, str(ranks)]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_PROC_BIND="false")
    bars = os.path.join(work, "bars.dqnbars")
    subprocess.run([cli, "synth", "--bars", "3000", "--seed", "4", "--out", bars], check=True,
                   env=env, stdout=subprocess.DEVNULL)
    sweep = ["--threads", "1", "sweep", "--data", bars, "--epochs", "3", "--steps-per-epoch",
             "60", "--learning-starts", "256", "--environments", "16", "--batch-size", "32",
             "--replay-capacity", "4096", "--probe-batch", "32", "--hidden", "16", "--seeds",
             "1-2", "--set", "learning-rate=1e-4,1e-3", "--set", "gamma=0.9,0.99",
             "--population", "2"]

    def mpi(ranks, arguments, extra_env=None, timeout=300):
        command = launch(ranks) + [cli] + arguments
        return subprocess.run(command, env=dict(env, **(extra_env or {})), capture_output=True,
                              text=True, timeout=timeout)

    def run_ok(ranks, arguments):
        done = mpi(ranks, arguments)
        if done.returncode != 0:
            fail("%s exited %d:\n%s" % (" ".join(arguments[-4:]), done.returncode, done.stderr))
        return done

    def same_results(a, b, what):
        """Leaderboards, plans and member run directories of sweeps a and b are equal."""
        def load(path):
            with open(path) as f:
                return json.load(f)
        if load(os.path.join(a, "leaderboard.json")) != load(os.path.join(b, "leaderboard.json")):
            fail(what + ": leaderboard.json differs")
        with open(os.path.join(a, "leaderboard.csv"), "rb") as fa, \
                open(os.path.join(b, "leaderboard.csv"), "rb") as fb:
            if fa.read() != fb.read():
                fail(what + ": leaderboard.csv differs")
        plan_a, plan_b = load(os.path.join(a, "sweep.json")), load(os.path.join(b, "sweep.json"))
        plan_a["base"].pop("out"), plan_b["base"].pop("out")
        # Each member's config.json records its own directory ("out", compared without it
        # below): so does the checksum of it that the plan keeps.
        for plan in (plan_a, plan_b):
            for member in plan["members"]:
                member["result"].get("files", {}).pop("config.json", None)
        if plan_a != plan_b:
            fail(what + ": sweep.json differs")
        members = sorted(os.listdir(os.path.join(a, "members")))
        if members != sorted(os.listdir(os.path.join(b, "members"))) or len(members) != 8:
            fail(what + ": the member directories differ: %s" % members)
        for m in members:
            for name in FILES:
                pa, pb = (os.path.join(d, "members", m, name) for d in (a, b))
                if name == "config.json":
                    ca, cb = load(pa), load(pb)
                    ca.pop("out"), cb.pop("out")
                    equal = ca == cb
                else:
                    with open(pa, "rb") as fa, open(pb, "rb") as fb:
                        equal = fa.read() == fb.read()
                if not equal:
                    fail("%s: members/%s/%s differs" % (what, m, name))

    # 1. Two ranks against one.
    one, two = os.path.join(work, "one"), os.path.join(work, "two")
    one_plain = one
    run_ok(1, sweep + ["--out", one])
    started = time.monotonic()
    done = run_ok(2, sweep + ["--out", two])
    two_seconds = time.monotonic() - started
    same_results(one, two, "2 ranks against 1")
    if "2 ranks; 4 populations (" not in done.stderr:
        fail("rank 0 did not report its hand-out:\n" + done.stderr)
    overhead = [line for line in done.stderr.splitlines() if "hand-out and records" in line]
    print("mpi_sweep: 2 ranks equal 1 rank bitwise (%.1f s); %s" % (two_seconds, overhead[0]))

    # 2. A rank killed inside the last population, then --resume on two ranks.
    killed = os.path.join(work, "killed")
    stop = {"LD_PRELOAD": failing_io, "ASAN_OPTIONS": "verify_asan_link_order=0",
            "DQNTRADER_STOP_PATH": "p-003/checkpoint-", "DQNTRADER_STOP_OP": "rename",
            "DQNTRADER_STOP_AFTER": "1"}
    command = launch(2) + [cli] + sweep + ["--out", killed]
    job = subprocess.Popen(command, env=dict(env, **stop), stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    stopped = None
    deadline = time.monotonic() + 240  # a safety net for a broken run, never a measurement
    while stopped is None and time.monotonic() < deadline and job.poll() is None:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/stat" % pid) as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    cmdline = f.read().split(b"\0")
            except OSError:
                continue
            if state == "T" and cli.encode() in cmdline and killed.encode() in cmdline:
                stopped = int(pid)
                break
        time.sleep(0.01)
    if stopped is None:
        job.kill()
        fail("no rank stopped at the last population's checkpoint:\n" + job.communicate()[1])
    os.kill(stopped, signal.SIGKILL)
    try:
        _, err = job.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        job.kill()
        fail("mpiexec did not end after a rank was killed")
    if job.returncode == 0:
        fail("mpiexec succeeded although a rank was killed")
    with open(os.path.join(killed, "sweep.json")) as f:
        recorded = json.load(f)
    finished = [p for p in recorded["populations"] if p["finished"]]
    if any(p["id"] == 3 for p in finished):
        fail("the killed population is recorded as finished")
    kept = {}
    for p in finished:
        for m in p["members"]:
            path = os.path.join(killed, recorded["members"][m]["run"], "metrics.jsonl")
            kept[path] = os.stat(path).st_mtime_ns
    resumed = run_ok(2, ["--threads", "1", "sweep", "--resume", killed])
    ran = [line for line in resumed.stderr.splitlines() if line.startswith("population ")]
    if len(ran) != 4 - len(finished):
        fail("--resume ran %d populations where %d had not finished:\n%s"
             % (len(ran), 4 - len(finished), resumed.stderr))
    for path, mtime in kept.items():
        if os.stat(path).st_mtime_ns != mtime:
            fail("a finished population ran again: %s was written" % path)
    same_results(one, killed, "killed and resumed against uninterrupted")
    print("mpi_sweep: a rank killed in population 4 of 4 (%d finished before): --resume ran %d "
          "and equals the uninterrupted sweep bitwise" % (len(finished), len(ran)))

    # 3. Ranks that do not share the output directory.
    a, b = os.path.join(work, "a", "sweep"), os.path.join(work, "b", "sweep")
    os.makedirs(os.path.dirname(a))
    os.makedirs(os.path.dirname(b))
    command = launch(1) + [cli] + sweep + ["--out", a, ":", numproc_flag, "1", cli] + sweep + \
        ["--out", b]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode == 0:
        fail("ranks with different output directories ran")
    if "not one directory on every rank: rank 1" not in done.stderr:
        fail("the failure does not say what is wrong:\n" + done.stderr)
    if os.path.exists(a) or os.path.exists(b):
        fail("ranks with different output directories left %s behind"
             % [p for p in (a, b) if os.path.exists(p)])
    print("mpi_sweep: ranks that do not share the output directory fail at the start, "
          "leaving nothing")

    # 4. Population based training within each population: 2 ranks against 1.
    pbt = sweep + ["--schedule", "pbt", "--pbt-fraction", "0.5"]
    one, two = os.path.join(work, "pbt-one"), os.path.join(work, "pbt-two")
    run_ok(1, pbt + ["--out", one])
    run_ok(2, pbt + ["--out", two])
    same_results(one, two, "PBT on 2 ranks against 1")
    with open(os.path.join(two, "sweep.json")) as f:
        plan = json.load(f)
    copies = sum(1 for m in plan["members"] for step in m["result"].get("schedule", [])
                 if "copied" in step)
    if copies != 8:  # 4 populations, one copy in each at the ends of epochs 1 and 2
        fail("PBT recorded %d copies in sweep.json, not 8" % copies)
    print("mpi_sweep: PBT on 2 ranks equals 1 rank bitwise (%d copies)" % copies)

    # 5. A population that fails on a rank: the others go on, its members are marked.
    failing = os.path.join(work, "failing")
    broken = {"LD_PRELOAD": failing_io, "ASAN_OPTIONS": "verify_asan_link_order=0",
              "DQNTRADER_FAIL_PATH": "p-002/checkpoint-", "DQNTRADER_FAIL_OP": "open",
              "DQNTRADER_FAIL_ERRNO": "EIO", "DQNTRADER_FAIL_AFTER": "0"}
    done = mpi(2, sweep + ["--out", failing], broken)
    if done.returncode != 0:
        fail("a sweep with one failed population exited %d:\n%s" % (done.returncode, done.stderr))
    with open(os.path.join(failing, "sweep.json")) as f:
        recorded = json.load(f)
    unfinished = [p["id"] for p in recorded["populations"] if not p["finished"]]
    if unfinished != [2]:
        fail("populations left unfinished: %s, not [2]" % unfinished)
    with open(os.path.join(failing, "leaderboard.json")) as f:
        board = json.load(f)
    failed = [m for m in board["members"] if m["status"] == "failed"]
    lost = set(recorded["populations"][2]["members"])
    if sorted(m["member"] for m in failed) != sorted(lost):
        fail("the leaderboard marks %s failed, not population 2's %s"
             % ([m["member"] for m in failed], sorted(lost)))
    reasons = [recorded["members"][m]["result"]["failure"] for m in lost]
    if not all(r.startswith("rank ") and "p-002/checkpoint-" in r for r in reasons):
        fail("the failed members do not say the rank and the file: %s" % reasons)
    resumed = run_ok(2, ["--threads", "1", "sweep", "--resume", failing])
    ran = [line for line in resumed.stderr.splitlines() if line.startswith("population ")]
    if len(ran) != 1:
        fail("--resume ran %d populations, not the failed one:\n%s" % (len(ran), resumed.stderr))
    same_results(one_plain, failing, "a failed population trained again against uninterrupted")
    print("mpi_sweep: a population failed on a rank (%s); the others finished, the leaderboard "
          "marked its members, --resume trained it alone and equals the uninterrupted sweep"
          % reasons[0].split(":")[0])


if __name__ == "__main__":
    main()
