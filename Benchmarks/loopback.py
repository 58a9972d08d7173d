"""Helpers the benchmark drivers (bench.py, cli.py, daemon.py) use: a free port on loopback,
waiting for a server to listen, a file's SHA-256, and an nginx of their own."""
import hashlib
import os
import socket
import subprocess
import time


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


class Nginx:
    """An nginx of its own on loopback (under work/name) serving root, logging
    `$connection $body_bytes_sent`."""

    def __init__(self, work, name, root, listen=""):
        self.port, self.prefix = free_port(), os.path.join(work, name)
        os.makedirs(os.path.join(self.prefix, "tmp"), exist_ok=True)
        self.log = os.path.join(self.prefix, "access.log")
        user = "user root;" if os.geteuid() == 0 else ""
        tmp = os.path.join(self.prefix, "tmp")
        self.conf = os.path.join(self.prefix, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(f"""daemon on; worker_processes 1; {user}
error_log {self.prefix}/error.log; pid {self.prefix}/nginx.pid;
events {{ worker_connections 1024; }}
http {{ log_format sent '$connection $body_bytes_sent'; access_log {self.log} sent; sendfile on;
  keepalive_requests 1000000;
  client_body_temp_path {tmp}; proxy_temp_path {tmp}; fastcgi_temp_path {tmp}; uwsgi_temp_path {tmp}; scgi_temp_path {tmp};
  server {{ listen 127.0.0.1:{self.port}{listen}; root {root}; }} }}""")
        self.signal(None)
        wait_for(self.port)

    def signal(self, name):
        extra = ["-s", name] if name else []
        subprocess.run(["/usr/sbin/nginx", "-p", self.prefix, "-c", self.conf, "-e", f"{self.prefix}/error.log"] + extra,
                       check=True, capture_output=True)

    def fresh_log(self):
        open(self.log, "w").close()
        self.signal("reopen")
        time.sleep(0.2)

    def connections(self):
        time.sleep(0.2)
        lines = [line.split() for line in open(self.log) if line.strip()]
        return len(lines), len({line[0] for line in lines})

    def stop(self):
        self.signal("stop")
