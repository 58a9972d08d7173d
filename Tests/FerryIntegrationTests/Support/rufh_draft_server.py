"""A server of the resumable-upload draft's current interop version (8), and of the ways a
server can get it wrong, for Ferry's tests. (Apple's server, the other one the tests use,
speaks version 6.) No PyPI package serves version 8, so this one is written from the draft
(draft-ietf-httpbis-resumable-upload, editor's copy of July 2026), with the standard library.

    python3 rufh_draft_server.py PORT DIRECTORY [ORIGIN]

Any POST or PUT is a target: `OPTIONS` on it answers `Upload-Limit`, a request with
`Upload-Complete` creates an upload resource under /uploads/. When complete, the body is
stored in DIRECTORY under the target's last path component, and the target answers 201 with
`stored N`. The target's query `?mode=` makes the upload resource misbehave:

- `cross-origin`: its URL is on another origin (`localhost` for `127.0.0.1`);
- `backwards`: the second append is acknowledged with an offset below the first's;
- `past`: the first append is acknowledged with more bytes than were sent;
- `conflict`: every append is answered 409 with offset 0;
- `vanish`: the server's first append is answered 404, and its resource is gone;
- `switch`: appends are answered 400 in interop version 6 (a server that changed protocol);
- `chunks`: `max-append-size` is 1 MiB (as in `backwards` and `past`);
- `stall-delete`: `DELETE` is never answered;
- `auth`, `redirect`: `max-append-size` is 1 MiB, and the first append is read whole, then
  answered 401 (a Basic challenge; the append must come again with `Authorization`) or 307
  (to the same resource, by another URL) without storing a byte;
- `auth-past`, `redirect-past`: as `auth` and `redirect`, but the append sent again is cut
  after 300 KiB (which are stored), and the next `HEAD` claims 800 KiB more: more than
  either sending of the append handed on, less than both together.

Every request line and every stored or deleted upload is printed, so tests can read the
exchanges.
"""
import os
import secrets
import socket
import time
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit, parse_qs

VERSION = "8"
port, directory = int(sys.argv[1]), sys.argv[2]
origin = sys.argv[3] if len(sys.argv) > 3 else f"http://127.0.0.1:{port}"
uploads = {}
vanished = []  # the one upload `vanish` made vanish
lock = threading.Lock()


def log(line):
    print(line, flush=True)


class Upload:
    def __init__(self, name, mode, length):
        self.name, self.mode, self.length = name, mode, length
        self.data = bytearray()
        self.complete = False
        self.appends = 0
        self.claimed = 0  # bytes a HEAD claims beyond those stored (`auth-past`, `redirect-past`)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, fields=(), body=b""):
        self.send_response(status)
        self.send_header("Upload-Draft-Interop-Version", VERSION)
        for name, value in fields:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def version_ok(self):
        if self.headers.get("Upload-Draft-Interop-Version") != VERSION:
            self.answer(400)
            return False
        return True

    def read_into(self, upload):
        """Reads the request's content into the upload as it arrives; True when whole."""
        left = int(self.headers.get("Content-Length", "0"))
        while left > 0:
            chunk = self.rfile.read(min(left, 65536))
            if not chunk:
                return False
            with lock:
                upload.data.extend(chunk)
            left -= len(chunk)
        return True

    def discard_content(self):
        """Reads the request's content and drops it; True when whole."""
        left = int(self.headers.get("Content-Length", "0"))
        while left > 0:
            chunk = self.rfile.read(min(left, 65536))
            if not chunk:
                return False
            left -= len(chunk)
        return True

    def finish_upload(self, upload):
        upload.complete = True
        with open(os.path.join(directory, upload.name), "wb") as out:
            out.write(upload.data)
        log(f"stored {len(upload.data)}")
        self.answer(201, [("Upload-Complete", "?1")], f"stored {len(upload.data)}\n".encode())

    def limits(self, mode):
        if mode in ("chunks", "backwards", "past", "auth", "auth-past", "redirect", "redirect-past"):
            return "max-append-size=1048576, max-age=3600"
        return "min-size=0, max-age=3600"

    def target(self):
        parts = urlsplit(self.path)
        mode = parse_qs(parts.query).get("mode", ["normal"])[0]
        return parts.path.rsplit("/", 1)[-1] or "upload", mode

    def do_OPTIONS(self):
        log(f"OPTIONS {self.path} v{self.headers.get('Upload-Draft-Interop-Version')}")
        if self.headers.get("Upload-Draft-Interop-Version") == VERSION:
            self.answer(204, [("Upload-Limit", self.limits(self.target()[1]))])
        else:
            self.answer(204)

    def create(self):
        log(f"{self.command} {self.path} complete={self.headers.get('Upload-Complete')}")
        if "Upload-Complete" not in self.headers:
            left = int(self.headers.get("Content-Length", "0"))
            data = self.rfile.read(left) if left else b""
            self.answer(200, body=f"plain {len(data)}\n".encode())
            return
        if not self.version_ok():
            return
        name, mode = self.target()
        length = self.headers.get("Upload-Length")
        upload = Upload(name, mode, int(length) if length else None)
        token = secrets.token_hex(8)
        with lock:
            uploads[token] = upload
        base = origin.replace("127.0.0.1", "localhost") if mode == "cross-origin" else origin
        location = f"{base}/uploads/{token}"
        whole = self.read_into(upload)
        if not whole:
            return
        if self.headers.get("Upload-Complete") == "?1":
            self.finish_upload(upload)
        else:
            self.answer(201, [("Location", location), ("Upload-Complete", "?0"),
                              ("Upload-Offset", str(len(upload.data))), ("Upload-Limit", self.limits(mode))])

    do_POST = create
    do_PUT = create

    def resource(self):
        token = urlsplit(self.path).path.rsplit("/", 1)[-1]
        with lock:
            return token, uploads.get(token)

    def do_HEAD(self):
        token, upload = self.resource()
        log(f"HEAD {self.path}")
        if not self.version_ok():
            return
        if upload is None:
            self.answer(404)
            return
        fields = [("Upload-Offset", str(len(upload.data) + upload.claimed)), ("Upload-Complete", "?1" if upload.complete else "?0"),
                  ("Upload-Limit", self.limits(upload.mode)), ("Cache-Control", "no-store")]
        if upload.length is not None:
            fields.append(("Upload-Length", str(upload.length)))
        self.answer(204, fields)

    def do_PATCH(self):
        token, upload = self.resource()
        offset = self.headers.get("Upload-Offset")
        log(f"PATCH {self.path} offset={offset} complete={self.headers.get('Upload-Complete')} "
            f"type={self.headers.get('Content-Type')}")
        if upload is None:
            self.answer(404)
            return
        if upload.mode == "switch":
            self.send_response(400)
            self.send_header("Upload-Draft-Interop-Version", "6")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if not self.version_ok():
            return
        if self.headers.get("Content-Type") != "application/partial-upload":
            self.answer(415)
            return
        upload.appends += 1
        if upload.mode == "vanish" and not vanished:
            vanished.append(token)
            with lock:
                del uploads[token]
            self.answer(404)
            return
        if upload.mode == "conflict" or offset != str(len(upload.data)):
            # Read what the client sends before answering: closed on a client still sending,
            # the connection would be reset and the 409 lost (the client then asks the offset).
            if not self.discard_content():
                return
            self.answer(409, [("Upload-Offset", "0" if upload.mode == "conflict" else str(len(upload.data))),
                              ("Upload-Complete", "?0")])
            return
        refusing = upload.mode.split("-")[0] in ("auth", "redirect")
        if refusing and (upload.appends == 1 or (upload.mode.startswith("auth") and "Authorization" not in self.headers)):
            self.discard_content()
            if upload.mode.startswith("auth"):
                self.answer(401, [("WWW-Authenticate", 'Basic realm="uploads"')])
            else:
                self.answer(307, [("Location", f"{origin}/uploads/{token}?moved=1")])
            return
        if upload.mode.endswith("-past") and upload.appends == 2:
            upload.data.extend(self.rfile.read(300 << 10))
            upload.claimed = 800 << 10
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if not self.read_into(upload):
            return
        if self.headers.get("Upload-Complete") == "?1":
            self.finish_upload(upload)
            return
        acknowledged = len(upload.data)
        if upload.mode == "past" and upload.appends == 1:
            acknowledged += 1000
        if upload.mode == "backwards" and upload.appends == 2:
            acknowledged = 1000
        self.answer(204, [("Upload-Offset", str(acknowledged)), ("Upload-Complete", "?0")])

    def do_DELETE(self):
        token, upload = self.resource()
        log(f"DELETE {self.path}")
        if upload is not None and upload.mode == "stall-delete":
            time.sleep(3600)
        with lock:
            uploads.pop(token, None)
        log("deleted" if upload else "delete of nothing")
        self.answer(204 if upload else 404)


server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
server.daemon_threads = True
log("listening")
server.serve_forever()
