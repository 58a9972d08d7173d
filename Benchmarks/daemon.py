"""The daemon with a long list (issue 59's rows): a private `ferry daemon` (its own state
directory and socket, `--keep-finished 1000000`), lists of 10,000 to 1,000,000 URLs added with
`ferry add -i`, and downloads of 1 KiB files from nginx beside `aria2c -i` with the same
parallelism. Run by Benchmarks/run after cli.py (its section goes on BENCHMARKS.md), or alone:

    python3 Benchmarks/daemon.py BIN_DIR
    FERRY_DAEMON_ADDS=10000,100000 FERRY_DAEMON_DOWNLOADS=10000 python3 Benchmarks/daemon.py BIN_DIR

BIN_DIR holds the release `ferry`. Every size runs once (each is long; the per-add rows are
medians within the run). The state directory is on tmpfs unless FERRY_DAEMON_STATE_DISK names
a directory on a disk.

Scenarios:
  adds       N URLs (default 10,000, 100,000 and 1,000,000) that nothing downloads (`--start-after`),
             added by `ferry add -i` of 10,000 lines at a time: the whole time, the time per
             task of the first and of the last 10,000, one `ferry add URL` with an empty store
             and with N stored (median of 5), the daemon's peak RSS (VmHWM), `ferry ls --state
             running` and `ferry ls --limit 100` with N stored (median of 5), and a restart
             (SIGTERM, start again): the time until `ferry ls` answers, and the totals kept.
  downloads  N files of 1 KiB (default 10,000 and 100,000) from nginx on loopback: `ferry add -i`
             then every task completed (the daemon at --max-transfers 16 --max-per-host 16),
             beside `aria2c -i LIST -j 16`; every file checked.
"""
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from loopback import Nginx

bin_dir = sys.argv[1]
ferry = os.path.abspath(os.path.join(bin_dir, "ferry"))
adds = [int(n) for n in os.environ.get("FERRY_DAEMON_ADDS", "10000,100000,1000000").split(",") if n]
downloads = [int(n) for n in os.environ.get("FERRY_DAEMON_DOWNLOADS", "10000,100000").split(",") if n]
work = tempfile.mkdtemp(prefix="ferry-daemon-bench.", dir="/dev/shm")
state_disk = os.environ.get("FERRY_DAEMON_STATE_DISK")
batch = 10_000
targets = []  # (row, target, measured, met)


class Daemon:
    """A private `ferry daemon`, started and stopped by the benchmark."""

    def __init__(self, name, options=()):
        base = state_disk or work
        self.state = os.path.join(base, f"state-{name}")
        shutil.rmtree(self.state, ignore_errors=True)
        self.socket = os.path.join(work, f"{name}.sock")
        self.options = ["--keep-finished", "1000000", "--allow", work] + list(options)
        self.start()

    @property
    def where(self):
        return ["--state-dir", self.state, "--socket", self.socket]

    def start(self):
        """Starts the daemon; returns the seconds until `ferry ls` answers."""
        began = time.monotonic()
        self.process = subprocess.Popen([ferry, "daemon"] + self.where + self.options,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.ferry(["ls", "--limit", "1"])
        return time.monotonic() - began

    def ferry(self, arguments, cwd=None):
        done = subprocess.run([ferry] + arguments + self.where, cwd=cwd, capture_output=True)
        if done.returncode != 0:
            raise SystemExit(f"ferry {arguments[0]} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
        return done.stdout.decode()

    def totals(self):
        done = subprocess.run(["curl", "-sS", "--unix-socket", self.socket, "http://daemon/v1/tasks?limit=1"],
                              capture_output=True, check=True)
        return json.loads(done.stdout).get("totals", {})

    def peak_rss(self):
        for line in open(f"/proc/{self.process.pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=120)


def timed_median(action, times=5):
    values = []
    for _ in range(times):
        began = time.monotonic()
        action()
        values.append(time.monotonic() - began)
    return statistics.median(values)


def list_file(path, lines):
    with open(path, "w") as f:
        f.writelines(lines)


def add_scenario(count):
    """N tasks that wait for their start: adds, lists, a restart."""
    daemon = Daemon(f"adds-{count}")
    out = os.path.join(work, "never")
    os.makedirs(out, exist_ok=True)
    later = ["--start-after", "360000"]
    single_empty = timed_median(lambda: daemon.ferry(["add", "http://127.0.0.1:9/one"] + later, cwd=out))
    per_batch = []
    began = time.monotonic()
    for start in range(0, count, batch):
        path = os.path.join(work, "list.txt")
        n = min(batch, count - start)
        list_file(path, (f"http://127.0.0.1:9/f{start + i}\n  dir={out}\n" for i in range(n)))
        chunk_began = time.monotonic()
        printed = daemon.ferry(["add", "-i", path] + later)
        per_batch.append((time.monotonic() - chunk_began) / n)
        if len(printed.split()) != n:
            raise SystemExit(f"ferry add -i printed {len(printed.split())} ids for {n} lines")
    whole = time.monotonic() - began
    single_full = timed_median(lambda: daemon.ferry(["add", "http://127.0.0.1:9/one"] + later, cwd=out))
    running = timed_median(lambda: daemon.ferry(["ls", "--state", "running"]))
    page = timed_median(lambda: daemon.ferry(["ls", "--limit", "100"]))
    rss = daemon.peak_rss()
    stored = sum(daemon.totals().values())
    daemon.stop()
    answered = daemon.start()
    kept = sum(daemon.totals().values())
    rss = max(rss, daemon.peak_rss())
    daemon.stop()
    shutil.rmtree(daemon.state, ignore_errors=True)
    print(f"| {count:,} | {whole:.1f} | {per_batch[0] * 1e6:.0f} | {per_batch[-1] * 1e6:.0f} | "
          f"{single_empty * 1e3:.0f} / {single_full * 1e3:.0f} | {rss:.1f} | {running:.3f} | {page:.3f} | "
          f"{answered:.2f} | {kept:,} of {stored:,} |", flush=True)
    if count == 100_000:
        targets.append(("100,000 adds", "< 30 s", f"{whole:.1f} s", whole < 30))
    if count == max(adds):
        n = f"{count:,}"
        flat = per_batch[-1] <= 2 * per_batch[0]
        targets.append((f"time per add, first vs last 10,000 of {n}", "flat",
                        f"{per_batch[0] * 1e6:.0f} µs → {per_batch[-1] * 1e6:.0f} µs", flat))
        targets.append((f"daemon peak RSS with {n} stored", "≤ 64 MiB", f"{rss:.1f} MiB", rss <= 64))
        targets.append((f"ferry ls --state running / --limit 100 at {n}", "< 0.2 s",
                        f"{running:.3f} s / {page:.3f} s", running < 0.2 and page < 0.2))
        targets.append((f"restart with {n} stored", "answers < 2 s, nothing lost",
                        f"{answered:.2f} s, {kept:,} of {stored:,}", answered < 2 and kept == stored))


def check(folder, count, body):
    names = os.listdir(folder)
    if len(names) != count:
        raise SystemExit(f"{folder}: {len(names)} files, not {count}")
    for name in names:
        with open(os.path.join(folder, name), "rb") as f:
            if f.read() != body:
                raise SystemExit(f"{folder}/{name} differs")


def download_scenario(count, nginx, body):
    out = os.path.join(work, "out")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    path = os.path.join(work, "downloads.txt")
    list_file(path, (f"http://127.0.0.1:{nginx.port}/small/{i}.bin\n  dir={out}\n" for i in range(count)))
    daemon = Daemon(f"downloads-{count}", ["--max-transfers", "16", "--max-per-host", "16"])
    began = time.monotonic()
    daemon.ferry(["add", "-i", path])
    while daemon.totals().get("completed", 0) < count:
        totals = daemon.totals()
        if totals.get("failed") or totals.get("canceled"):
            raise SystemExit(f"tasks failed: {totals}")
        time.sleep(0.05)
    ferry_wall = time.monotonic() - began
    rss = daemon.peak_rss()
    daemon.stop()
    shutil.rmtree(daemon.state, ignore_errors=True)
    check(out, count, body)
    shutil.rmtree(out)
    os.makedirs(out)
    began = time.monotonic()
    subprocess.run(["aria2c", "-q", "-i", path, "-j", "16", "--allow-overwrite=true", "--auto-file-renaming=false",
                    "--file-allocation=none"], check=True)
    aria_wall = time.monotonic() - began
    check(out, count, body)
    ratio = ferry_wall / aria_wall
    print(f"| {count:,} | {ferry_wall:.1f} | {ferry_wall / count * 1e3:.2f} | {rss:.1f} | {aria_wall:.1f} | "
          f"{aria_wall / count * 1e3:.2f} | {ratio:.2f} |", flush=True)
    targets.append((f"{count:,} downloads, ferry daemon ÷ aria2c -i -j 16", "≤ 1.0×", f"{ratio:.2f}×", ratio <= 1.0))


try:
    where = f"a directory on disk ({state_disk})" if state_disk else "tmpfs"
    print("\n## The daemon with a long list (Benchmarks/daemon.py)\n")
    print(f"A private `ferry daemon` (`--keep-finished 1000000`), its store on {where}; each size "
          "run once.\n")
    if adds:
        print("Tasks that nothing downloads (`ferry add -i` with `--start-after`), 10,000 lines "
              "an `add -i`; µs per task of the first and of the last 10,000; one `ferry add URL` "
              "(ms, the process included) with an empty store and with N stored; `ls` in s "
              "(median of 5); the restart: SIGTERM, start, until `ferry ls` answers.\n")
        print("| tasks | add all s | µs/task first | µs/task last | one add ms empty / full | "
              "daemon peak RSS MiB | ls --state running s | ls --limit 100 s | restart s | kept |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for count in adds:
            add_scenario(count)
    if downloads:
        root = os.path.join(work, "root")
        os.makedirs(os.path.join(root, "small"))
        body = os.urandom(1024)
        for i in range(max(downloads)):
            with open(os.path.join(root, "small", f"{i}.bin"), "wb") as f:
                f.write(body)
        nginx = Nginx(work, "nginx", root)
        try:
            print("\n1 KiB files from nginx on loopback: `ferry add -i` until every task completed "
                  "(`--max-transfers 16 --max-per-host 16`) beside `aria2c -i LIST -j 16`.\n")
            print("| files | ferry s | ferry ms/file | daemon peak RSS MiB | aria2c s | aria2c ms/file | "
                  "ferry ÷ aria2c |")
            print("|---|---|---|---|---|---|---|")
            for count in downloads:
                download_scenario(count, nginx, body)
        finally:
            nginx.stop()
    print("\n| target | goal | measured | met |\n|---|---|---|---|")
    for row, goal, measured, met in targets:
        print(f"| {row} | {goal} | {measured} | {'yes' if met else 'no'} |")
finally:
    shutil.rmtree(work, ignore_errors=True)
