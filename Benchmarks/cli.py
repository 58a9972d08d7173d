"""What users run, beside curl in the same run: the `ferry` command with many files, to a
real disk, and from Apache httpd's mod_http2 (issue 58's rows). Run by Benchmarks/run after
bench.py (its section goes on BENCHMARKS.md), or alone:

    python3 Benchmarks/cli.py BIN_DIR RUNS [DISK_DIR]
    FERRY_CLI_SCENARIOS=13,14 python3 Benchmarks/cli.py BIN_DIR RUNS    # some of them

BIN_DIR holds the release `ferry`; DISK_DIR is a directory on a disk (not tmpfs) for the
1 GiB scenario (default: a folder under .build). Every command runs under GNU time (wall,
CPU = user + system, peak RSS); medians of RUNS runs with min and max, the clients
alternating; every output is checked byte for byte; the connections each client opened
come from the server's log.

Scenarios:
  11 many https  1,000 files of 64 KiB over HTTPS from nginx, with HTTP/2 (`listen ... ssl
                 http2`) and with HTTP/1.1: `ferry get -Z --parallel-max 6 -O` vs
                 `curl -Z --parallel-max 6 --remote-name-all`.
  12 many http   1 KiB files over plain HTTP from nginx, 1,000, 10,000 and 50,000 of them:
                 `ferry get -i LIST -Z --parallel-max 16` vs `curl -Z --parallel-max 16`
                 (the same URLs in a config file) and `aria2c -i LIST -j 16`; with
                 BIN_DIR/bench-ahc, raw AsyncHTTPClient (Ferry's transport) on the same list.
  13 disk        1 GiB from nginx into a directory on disk: ferry get vs curl, the page cache
                 written back (`sync`) before each run; fsync calls counted with strace; a
                 `kill -9` half-way, then `ferry get -c`: where it continued.
  14 mod_http2   256 MiB over HTTPS from Apache httpd's mod_http2: ferry get vs
                 curl --http2 (skipped when apache2 is not installed).
  15 allocations heap allocations per file of `ferry get -i LIST -Z` and of curl -Z, counted
                 by a preloaded shim (Benchmarks/malloc-count/count.c): (count at 1,000 files
                 - count at 1) / 999.
"""
import hashlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from loopback import Nginx, free_port, sha256, wait_for

bin_dir, runs = sys.argv[1], int(sys.argv[2])
# FERRY_CLI_SCENARIOS=13,14 runs only those (default: all four).
only = set(os.environ.get("FERRY_CLI_SCENARIOS", "11,12,13,14,15").split(","))
ferry = os.path.abspath(os.path.join(bin_dir, "ferry"))
# Benchmarks/Sources/bench-ahc, built by Benchmarks/run: scenario 12's floor of the transport.
ahc = os.path.abspath(os.path.join(bin_dir, "bench-ahc"))
work = tempfile.mkdtemp(prefix="ferry-cli-bench.", dir="/dev/shm")
disk = sys.argv[3] if len(sys.argv) > 3 else os.path.abspath(".build/cli-bench-disk")
targets = []  # (scenario, target, measured, met)


def timed(command, cwd=None):
    """Runs command under GNU time; (wall s, CPU s, peak RSS MiB)."""
    stats = os.path.join(work, "time")
    done = subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", "-o", stats] + command, cwd=cwd,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if done.returncode != 0:
        raise SystemExit(f"{command[0]} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    wall, user, system, rss = open(stats).read().split()
    return float(wall), float(user) + float(system), int(rss) / 1024


def span(values, digits=2):
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def median(rows, name, index=0):
    return statistics.median(row[index] for row in rows[name])


def empty(directory):
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)


def table(title, explanation, rows, reference, extra=None):
    print(f"\n## {title}\n\n{explanation}\n")
    head = "| client | wall s | CPU s | peak RSS MiB |" + (f" {extra[0]} |" if extra else "") + " ferry wall ÷ client wall |"
    print(head)
    print("|" + "---|" * head.count(" |"))
    for name, values in rows.items():
        cols = [span([v[i] for v in values]) for i in range(3)]
        ratio = "—" if name == reference else f"{median(rows, reference) / median(rows, name):.2f}"
        more = f" {extra[1][name]} |" if extra else ""
        print(f"| {name} | {' | '.join(cols)} |{more} {ratio} |")


def alternate(commands, check, before=None):
    """Runs each command `runs` times, alternating; check(name) after each run. The rows and
    the connections each run opened (from `before`'s server, when given), by name."""
    rows = {name: [] for name in commands}
    opened = {name: set() for name in commands}
    for _ in range(runs):
        for name, (command, cwd, server) in commands.items():
            if before:
                before()
            if server:
                server.fresh_log()
            rows[name].append(timed(command, cwd))
            check(name)
            if server:
                opened[name].add(server.connections()[1])
    return rows, {name: "/".join(map(str, sorted(c))) or "—" for name, c in opened.items()}


def url_lists(name, urls):
    """The same URLs as a list for `ferry get -i` and aria2c, and as a config for curl -K."""
    plain, config = os.path.join(work, f"list{name}"), os.path.join(work, f"curl{name}")
    with open(plain, "w") as f:
        f.write("\n".join(urls) + "\n")
    with open(config, "w") as f:
        f.write("".join(f'url = "{u}"\n' for u in urls))
    return plain, config


def identical_files(directory, count, expected):
    names = os.listdir(directory)
    return len(names) == count and all(sha256(os.path.join(directory, n)) == expected for n in names)


commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
print("\n# The `ferry` command: many files, a disk, mod_http2\n\n"
      f"Made by `Benchmarks/cli.py` (issue 58's rows) from Ferry {commit or '?'}, "
      f"{subprocess.run(['curl', '--version'], capture_output=True, text=True).stdout.split(' (')[0]}, "
      f"{os.cpu_count()} cores; medians of {runs} runs (min–max), the clients alternating; "
      "whole commands under GNU time; connections from the server's log.")

root = os.path.join(work, "root")
os.makedirs(root)
# The HTTPS servers' certificate (11 and 14).
cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
                "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)

# 11. Many files over HTTPS, 6 at a time.
if "11" in only:
    os.makedirs(os.path.join(root, "m"))
    body = os.urandom(64 << 10)
    for i in range(1000):
        with open(os.path.join(root, "m", f"f{i}"), "wb") as f:
            f.write(body)
    expected = hashlib.sha256(body).hexdigest()
    for version, listen in (("HTTP/2", " ssl http2"), ("HTTP/1.1", " ssl")):
        server = Nginx(work, "tls" if version == "HTTP/2" else "tls1", root, f"{listen}; ssl_certificate {cert}; "
                       f"ssl_certificate_key {key}")
        urls = [f"https://127.0.0.1:{server.port}/m/f{i}" for i in range(1000)]
        here = os.path.join(work, "out")
        flag = "--http2" if version == "HTTP/2" else "--http1.1"
        commands = {
            "ferry get -Z -O": ([ferry, "get", "-q", flag, "--cacert", cert, "-Z", "--parallel-max", "6", "-O"] + urls,
                                here, server),
            "curl -Z --remote-name-all": (["curl", "-sS", flag, "--cacert", cert, "-Z", "--parallel-max", "6",
                                           "--remote-name-all"] + urls, here, server),
        }
        rows, opened = alternate(commands, lambda name: identical_files(here, 1000, expected)
                                 or sys.exit(f"{name}: not 1,000 identical files"), lambda: empty(here))
        server.stop()
        table(f"11. 1,000 × 64 KiB over HTTPS, {version}, 6 at a time",
              f"`ferry get -q {flag} -Z --parallel-max 6 -O URL…` beside `curl -sS {flag} -Z --parallel-max 6 "
              "--remote-name-all URL…`, from nginx, into tmpfs.", rows, "ferry get -Z -O", ("connections", opened))
        ratio = median(rows, "ferry get -Z -O") / median(rows, "curl -Z --remote-name-all")
        targets.append((f"CLI 1,000 × 64 KiB, HTTPS {version}", "≤ 1.0× curl",
                        f"{ratio:.2f}× curl, {opened['ferry get -Z -O']} connections (curl "
                        f"{opened['curl -Z --remote-name-all']})", ratio <= 1.0))


# 12. 1 KiB files over plain HTTP from a list, 16 at a time.
if "12" in only:
    os.makedirs(os.path.join(root, "s"))
    small = os.urandom(1024)
    for i in range(50_000):
        with open(os.path.join(root, "s", str(i)), "wb") as f:
            f.write(small)
    small_expected = hashlib.sha256(small).hexdigest()
    server = Nginx(work, "plain", root)
    rss = {}
    for count in (1_000, 10_000, 50_000):
        urls = [f"http://127.0.0.1:{server.port}/s/{i}" for i in range(count)]
        plain, config = url_lists(f"{count}", urls)
        here = os.path.join(work, "out")
        commands = {
            "ferry get -i -Z": ([ferry, "get", "-q", "-i", plain, "-Z", "--parallel-max", "16"], here, server),
            # Ferry's default is 6 connections to a host; curl's -Z has no such bound.
            "ferry get -i -Z --max-per-host 16": ([ferry, "get", "-q", "-i", plain, "-Z", "--parallel-max", "16",
                                                   "--max-per-host", "16"], here, server),
            "curl -Z -K": (["curl", "-sS", "-Z", "--parallel-max", "16", "--remote-name-all", "-K", config], here, server),
            "aria2c -i -j 16": (["aria2c", "-q", "-j16", "-x1", "-s1", "--allow-overwrite=true",
                                 "--file-allocation=none", "-i", plain], here, server),
        }
        if os.path.exists(ahc):
            # The transport alone: AsyncHTTPClient fetching the same list into files, 16 at a
            # time, with none of a task's work (no resume data, no lock, no partial file).
            commands["raw AsyncHTTPClient, 16 at a time"] = ([ahc, "many", plain, here, "16"], here, server)
        rows, opened = alternate(commands, lambda name: identical_files(here, count, small_expected)
                                 or sys.exit(f"{name}: not {count:,} identical files"), lambda: empty(here))
        table(f"12. {count:,} × 1 KiB over HTTP from a list, 16 at a time",
              f"`ferry get -q -i LIST -Z --parallel-max 16` beside `curl -sS -Z --parallel-max 16 --remote-name-all -K "
              "CONFIG` (the same URLs) and `aria2c -i LIST -j16`, from nginx, into tmpfs. Ferry opens at most 6 "
              "connections to a host unless `--max-per-host` says more; curl's `-Z` has no such bound.", rows, "ferry get -i -Z",
              ("connections", opened))
        ratio = median(rows, "ferry get -i -Z") / median(rows, "curl -Z -K")
        rss[count] = median(rows, "ferry get -i -Z", 2)
        transport = "raw AsyncHTTPClient, 16 at a time"
        floor = (f", {median(rows, transport) / median(rows, 'curl -Z -K'):.2f}× for AsyncHTTPClient alone"
                 if transport in rows else "")
        targets.append((f"CLI {count:,} × 1 KiB, -i -Z", "≤ 1.0× curl",
                        f"{ratio:.2f}× curl ({median(rows, 'ferry get -i -Z') / median(rows, 'aria2c -i -j 16'):.2f}× "
                        f"aria2c{floor}), {rss[count]:.1f} MiB", ratio <= 1.0))
    server.stop()
    limit = 2 * rss[1_000] + 20
    targets.append(("CLI peak RSS at 50,000 files", f"≤ 2 × RSS at 1,000 + 20 MiB ({limit:.1f})",
                    f"{rss[50_000]:.1f} MiB", rss[50_000] <= limit))
    shutil.rmtree(os.path.join(root, "s"))
    shutil.rmtree(os.path.join(root, "m"))


# 15. Heap allocations per file, counted by a preloaded shim.
if "15" in only:
    shim = os.path.join(work, "count.so")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", shim,
                    os.path.join(os.path.dirname(os.path.abspath(__file__)), "malloc-count", "count.c")], check=True)
    os.makedirs(os.path.join(root, "a"))
    for i in range(1000):
        with open(os.path.join(root, "a", str(i)), "wb") as f:
            f.write(b"x" * 1024)
    server = Nginx(work, "allocations", root)
    here = os.path.join(work, "out")
    counts = {}
    for count in (1, 1000):
        urls = [f"http://127.0.0.1:{server.port}/a/{i}" for i in range(count)]
        plain, config = url_lists(f"a{count}", urls)
        for name, command in (("ferry get -i -Z", [ferry, "get", "-q", "-i", plain, "-Z", "--parallel-max", "16"]),
                              ("curl -Z -K", ["curl", "-sS", "-Z", "--parallel-max", "16", "--remote-name-all",
                                              "-K", config])):
            samples = []
            for _ in range(runs):
                empty(here)
                out = os.path.join(work, "mallocs")
                if os.path.exists(out):
                    os.remove(out)
                subprocess.run(command, cwd=here, check=True, stdout=subprocess.DEVNULL,
                               env=dict(os.environ, LD_PRELOAD=shim, MALLOC_COUNT_OUT=out))
                samples.append(sum(int(line) for line in open(out)))
            counts[(name, count)] = statistics.median(samples)
    server.stop()
    print("\n## 15. Heap allocations per file\n\n"
          "`malloc`, `calloc`, `realloc` and the aligned forms, counted by a preloaded shim "
          "(`Benchmarks/malloc-count/count.c`) over the whole command, 1 KiB files from nginx; medians of "
          f"{runs} runs. Per file: (count at 1,000 files − count at 1) ÷ 999.\n")
    print("| client | allocations, 1 file | allocations, 1,000 files | per file |")
    print("|---|---|---|---|")
    for name in ("ferry get -i -Z", "curl -Z -K"):
        one, many = counts[(name, 1)], counts[(name, 1000)]
        print(f"| {name} | {one:,.0f} | {many:,.0f} | {(many - one) / 999:,.0f} |")
    shutil.rmtree(os.path.join(root, "a"))


# The 1 GiB file of 13, whose first 256 MiB 14 serves.
if only & {"13", "14"}:
    big = os.path.join(root, "big.bin")
    with open(big, "wb") as f:
        for _ in range(1024):
            f.write(os.urandom(1 << 20))
    big_expected = sha256(big)


# 13. 1 GiB to a directory on disk.
if "13" in only:
    empty(disk)
    server = Nginx(work, "disk", root)
    url = f"http://127.0.0.1:{server.port}/big.bin"
    destination = os.path.join(disk, "f")
    on = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "-T", disk], capture_output=True, text=True).stdout.strip()
    if on in ("tmpfs", "ramfs", ""):
        raise SystemExit(f"{disk} is not on a disk ({on or 'unknown'}): give a DISK_DIR on one")


    def written_back():
        empty(disk)
        subprocess.run(["sync"])


    commands = {
        "ferry get": ([ferry, "get", "-q", "-o", destination, url], None, None),
        "curl": (["curl", "-sS", "-o", destination, url], None, None),
    }
    rows, _ = alternate(commands, lambda name: sha256(destination) == big_expected
                        or sys.exit(f"{name} wrote another file"), written_back)
    written_back()
    traced = os.path.join(work, "strace")
    subprocess.run(["strace", "-f", "-c", "-e", "trace=fsync,fdatasync,sync_file_range", "-o", traced,
                    ferry, "get", "-q", "-o", destination, url], check=True)
    fsyncs = sum(int(line.split()[3]) for line in open(traced)
                 if line.split()[-1:] and line.split()[-1] in ("fsync", "fdatasync", "sync_file_range"))
    table("13. 1 GiB to a directory on disk",
          f"1 GiB from nginx on loopback into `{disk}` ({on}), `sync` before each run; {fsyncs} fsync calls for the "
          "whole download (strace -c -f, one more run).", rows, "ferry get")
    ratio = median(rows, "ferry get") / median(rows, "curl")
    targets.append(("CLI 1 GiB to disk", "≤ 1.0× curl", f"{ratio:.2f}× curl, {fsyncs} fsyncs", ratio <= 1.0))
    # kill -9 half-way, then -c: nginx's log of the continuation's bytes says where it began.
    written_back()
    first = subprocess.Popen([ferry, "get", "-q", "-o", destination, url])
    def partial_size():
        names = [n for n in os.listdir(disk) if n.endswith(".partial")]
        return os.path.getsize(os.path.join(disk, names[0])) if names else 0
    while first.poll() is None:
        if partial_size() >= os.path.getsize(big) // 2:
            first.send_signal(signal.SIGKILL)
            break
        time.sleep(0.002)
    first.wait()
    at_kill = partial_size()
    server.fresh_log()
    subprocess.run([ferry, "get", "-q", "-c", "-o", destination, url], check=True)
    whole = sha256(destination) == big_expected
    sent = sum(int(line.split()[1]) for line in open(server.log) if line.strip())
    resumed_at = os.path.getsize(big) - sent
    mib = 1 << 20
    print(f"\n`kill -9` once half the file was on disk ({at_kill / mib:.1f} MiB written), then `ferry get -c`: "
          f"continued at {resumed_at / mib:.1f} MiB ({(at_kill - resumed_at) / mib:.1f} MiB fetched twice), "
          f"the file {'identical' if whole else 'NOT identical'}.")
    targets.append(("CLI 1 GiB to disk, kill -9 half-way then -c", "continues at the bytes written, identical",
                    f"{(at_kill - resumed_at) / mib:.1f} MiB fetched twice, {'identical' if whole else 'different'}",
                    whole and resumed_at == at_kill))
    server.stop()
    shutil.rmtree(disk, ignore_errors=True)


# 14. 256 MiB from Apache httpd's mod_http2.
apache = shutil.which("apache2") or (os.path.exists("/usr/sbin/apache2") and "/usr/sbin/apache2")
if "14" in only and apache:
    site = os.path.join(work, "apache")
    os.makedirs(os.path.join(site, "root"))
    with open(big, "rb") as source, open(os.path.join(site, "root", "f.bin"), "wb") as f:
        f.write(source.read(256 << 20))
    part_expected = sha256(os.path.join(site, "root", "f.bin"))
    modules = "/usr/lib/apache2/modules"
    port = free_port()
    with open(os.path.join(site, "httpd.conf"), "w") as f:
        f.write(f"""ServerRoot {site}
ServerName 127.0.0.1
PidFile {site}/httpd.pid
Listen 127.0.0.1:{port}
LoadModule mpm_event_module {modules}/mod_mpm_event.so
LoadModule authz_core_module {modules}/mod_authz_core.so
LoadModule mime_module {modules}/mod_mime.so
LoadModule ssl_module {modules}/mod_ssl.so
LoadModule http2_module {modules}/mod_http2.so
LoadModule socache_shmcb_module {modules}/mod_socache_shmcb.so
TypesConfig /etc/mime.types
User www-data
Group www-data
ErrorLog {site}/error.log
DocumentRoot {site}/root
<Directory {site}/root>
  Require all granted
</Directory>
Protocols h2 http/1.1
SSLEngine on
SSLCertificateFile {cert}
SSLCertificateKeyFile {key}
""")
    subprocess.run(["chmod", "-R", "a+rX", work], check=True)
    subprocess.run([apache, "-f", os.path.join(site, "httpd.conf"), "-k", "start"], check=True)
    wait_for(port)
    part = os.path.join(work, "out", "f")
    empty(os.path.join(work, "out"))
    url = f"https://127.0.0.1:{port}/f.bin"
    commands = {
        "ferry get --http2": ([ferry, "get", "-q", "--http2", "--cacert", cert, "-o", part, url], None, None),
        "curl --http2": (["curl", "-sS", "--http2", "--cacert", cert, "-o", part, url], None, None),
    }
    rows, _ = alternate(commands, lambda name: sha256(part) == part_expected or sys.exit(f"{name} wrote another file"))
    subprocess.run([apache, "-f", os.path.join(site, "httpd.conf"), "-k", "stop"])
    table("14. 256 MiB from Apache httpd's mod_http2",
          "256 MiB over HTTPS (TLS 1.3, HTTP/2) from Debian's apache2 (mpm_event, mod_http2's defaults), into tmpfs.",
          rows, "ferry get --http2")
    ratio = median(rows, "ferry get --http2") / median(rows, "curl --http2")
    targets.append(("CLI 256 MiB from mod_http2", "≤ 1.0× curl --http2", f"{ratio:.2f}× curl", ratio <= 1.0))
elif "14" in only:
    print("\n## 14. 256 MiB from Apache httpd's mod_http2\n\nSkipped: apache2 is not installed.")

print("\n## Targets (the `ferry` command)\n\n| scenario | target | measured | met |\n|---|---|---|---|")
for scenario, target, measured, met in targets:
    print(f"| {scenario} | {target} | {measured} | {'yes' if met else '**no**'} |")
shutil.rmtree(work, ignore_errors=True)
