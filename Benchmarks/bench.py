"""Ferry's benchmark driver, run by Benchmarks/run after it has installed the tools and built
ferry and ferry-testserver in release mode. Whole-process measurements (GNU time: wall, CPU,
peak RSS), medians of RUNS runs with min and max, every output checked byte for byte.

Scenarios (more of the benchmark issue's list will join):
  download  1 GiB from nginx on loopback into tmpfs: ferry get vs curl, wget, aria2c (1 and 4)
  upload    the same file as a multipart part to ferry-testserver's sink: ferry upload vs curl -F
  resume    a ferry get killed (kill -9) at 50 %, then ferry get -c: bytes fetched twice
            (from nginx's log) and time from start to the first resumed byte
"""
import hashlib
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import time

ferry, testserver, work, size_mib, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
size = size_mib * 1024 * 1024
source = os.path.join(work, "root", "file.bin")
out = os.path.join(work, "out")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def timed(command):
    """Runs command under GNU time; returns (wall s, cpu s, peak RSS MiB, stdout)."""
    stats = os.path.join(work, "time")
    result = subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", "-o", stats] + command, capture_output=True)
    if result.returncode != 0:
        raise SystemExit(f"{command[0]} failed ({result.returncode}): {result.stderr.decode()[-500:]}")
    wall, user, sys_, rss = open(stats).read().split()
    return float(wall), float(user) + float(sys_), int(rss) / 1024, result.stdout


def nginx(log):
    port = free_port()
    conf = os.path.join(work, "nginx.conf")
    user = "user root;" if os.geteuid() == 0 else ""
    tmp = os.path.join(work, "tmp")
    with open(conf, "w") as f:
        f.write(f"""daemon on; worker_processes 1; {user}
error_log {work}/error.log; pid {work}/nginx.pid;
events {{ worker_connections 64; }}
http {{ log_format sent '$body_bytes_sent'; access_log {log} sent; sendfile on;
  client_body_temp_path {tmp}; proxy_temp_path {tmp}; fastcgi_temp_path {tmp}; uwsgi_temp_path {tmp}; scgi_temp_path {tmp};
  server {{ listen 127.0.0.1:{port}; root {work}/root; }} }}""")
    subprocess.run(["/usr/sbin/nginx", "-p", work, "-c", conf, "-e", f"{work}/error.log"], check=True)
    wait_for(port)
    return port


def stop_nginx():
    subprocess.run(["/usr/sbin/nginx", "-p", work, "-c", os.path.join(work, "nginx.conf"), "-s", "stop"], capture_output=True)
    time.sleep(0.3)


def table(title, explanation, rows, reference="ferry"):
    print(f"\n## {title}\n\n{explanation}\n")
    print("| tool | wall s | CPU s | peak RSS MiB | Ferry wall ÷ tool wall |")
    print("|---|---|---|---|---|")
    ferry_wall = statistics.median(r[0] for r in rows[reference])
    for name, values in rows.items():
        cols = []
        for i in range(3):
            column = [v[i] for v in values]
            cols.append(f"{statistics.median(column):.2f} ({min(column):.2f}–{max(column):.2f})")
        ratio = "—" if name == reference else f"{ferry_wall / statistics.median(v[0] for v in values):.2f}"
        print(f"| {name} | {' | '.join(cols)} | {ratio} |")


expected = sha256(source)
cpu = subprocess.run("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2", shell=True, capture_output=True, text=True).stdout.strip()
print(f"# Benchmarks\n\nMade by `Benchmarks/run` on {os.cpu_count()} cores, {cpu}, {platform.system()} {platform.release()}; "
      f"{size_mib} MiB file in tmpfs; medians of {runs} runs (min–max); whole-process measurements (GNU time).")

# Download
log = os.path.join(work, "access.log")
port = nginx(log)
url = f"http://127.0.0.1:{port}/file.bin"
target = os.path.join(out, "f")
commands = {
    "ferry": [ferry, "get", "--quiet", "-o", target, url],
    "curl": ["curl", "-s", "-o", target, url],
    "wget": ["wget", "-q", "-O", target, url],
    "aria2c -x1": ["aria2c", "-q", "-x1", "-s1", "--allow-overwrite=true", "--file-allocation=none", "-d", out, "-o", "f", url],
    "aria2c -x4": ["aria2c", "-q", "-x4", "-s4", "--allow-overwrite=true", "--file-allocation=none", "-d", out, "-o", "f", url],
}
rows = {name: [] for name in commands}
for _ in range(runs):
    for name, command in commands.items():
        if os.path.exists(target):
            os.remove(target)
        wall, cpu_s, rss, _ = timed(command)
        if sha256(target) != expected:
            raise SystemExit(f"{name} produced a different file")
        rows[name].append((wall, cpu_s, rss))
table("Download", f"{size_mib} MiB from nginx on loopback into tmpfs (`ferry get -o`, CLI).", rows)

# Resume: kill -9 at 50 %, then -c.
twice, first_byte = [], []
for _ in range(runs):
    for path in [target] + [os.path.join(out, n) for n in os.listdir(out)]:
        if os.path.exists(path):
            os.remove(path)
    open(log, "w").close()
    subprocess.run(["/usr/sbin/nginx", "-p", work, "-c", os.path.join(work, "nginx.conf"), "-s", "reopen"], capture_output=True)
    time.sleep(0.2)
    first = subprocess.Popen([ferry, "get", "--quiet", "-o", target, url])
    while first.poll() is None:
        partials = [n for n in os.listdir(out) if n.endswith(".partial")]
        if partials and os.path.getsize(os.path.join(out, partials[0])) >= size // 2:
            first.send_signal(signal.SIGKILL)
            break
        time.sleep(0.002)
    first.wait()
    started = time.monotonic()
    second = subprocess.Popen([ferry, "get", "-c", "--json", "-o", target, url], stdout=subprocess.PIPE, text=True)
    seen_first = None
    for line in second.stdout:
        event = json.loads(line)
        if event.get("event") == "progress" and seen_first is None:
            seen_first = time.monotonic() - started
    second.wait()
    if second.returncode != 0 or sha256(target) != expected:
        raise SystemExit("the resumed download is not identical")
    time.sleep(0.3)
    sent = sum(int(line) for line in open(log) if line.strip())
    twice.append((sent - size) / (1024 * 1024))
    first_byte.append(seen_first * 1000)
print(f"\n## Resume at 50 %\n\n`ferry get -o` killed with SIGKILL once half the file was on disk, then `ferry get -c`; "
      f"bytes fetched twice from nginx's log of bytes sent; time from starting the second process to its first "
      f"progress event.\n")
print("| measure | median (min–max) |\n|---|---|")
print(f"| fetched twice, MiB | {statistics.median(twice):.1f} ({min(twice):.1f}–{max(twice):.1f}) |")
print(f"| to first resumed byte, ms | {statistics.median(first_byte):.0f} ({min(first_byte):.0f}–{max(first_byte):.0f}) |")
stop_nginx()

# Upload to ferry-testserver's sink (its fast multipart scanner hashes the file part).
sink_port = free_port()
server = subprocess.Popen([testserver, "--port", str(sink_port)], stdout=subprocess.DEVNULL)
wait_for(sink_port)
sink = f"http://127.0.0.1:{sink_port}/sink?parser=scan"
commands = {
    "ferry": [ferry, "upload", "--quiet", "-F", f"file=@{source}", sink],
    # Without "Expect:", curl waits a second for a 100 Continue the sink never sends.
    "curl -F": ["curl", "-s", "-H", "Expect:", "-F", f"file=@{source}", sink],
}
rows = {name: [] for name in commands}
for _ in range(runs):
    for name, command in commands.items():
        wall, cpu_s, rss, reply = timed(command)
        parts = json.loads(reply).get("parts") or [{}]
        if parts[-1].get("sha256") != expected:
            raise SystemExit(f"{name}: the sink read a different file part")
        rows[name].append((wall, cpu_s, rss))
server.terminate()
table("Multipart upload", f"The {size_mib} MiB file as a multipart part to ferry-testserver's sink, which hashes the "
      "part (`ferry upload -F` vs `curl -F`, CLI).", rows)
