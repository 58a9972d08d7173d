# An HTTP/2 server over TLS on hyper-h2 (PyPI's `h2`), for the frames nginx never sends:
#   python3 h2_frames.py PORT CERT KEY
# Each path answers GET (and HEAD) with a body of ?size=N bytes (default 3 MiB; byte i is
# i % 251), in DATA frames of 4,096 bytes, the way the path names:
#   /padded        every frame padded, the pad length going round 0..255 (RFC 9113 §6.1)
#   /empty-between an empty DATA frame after every frame with data
#   /trailers      the body, then a trailer section (HEADERS with END_STREAM)
#   /early-hints   a 103 Early Hints head (link: </style.css>; rel=preload; as=style) first
#   /plain         no content-length
#   /short         content-length 10 more than the body
#   /long          content-length 10 less than the body
#   /overflow      16 MiB more than the client's initial stream window, at once, ignoring
#                  the window, with no content-length ("overflow STREAM BYTES" is printed)
# Anything else: 404. The server keeps h2's flow control (it waits for WINDOW_UPDATE) on
# every path but /overflow, whose frames are written past it. Each RST_STREAM the client
# sends is printed: "reset STREAM CODE"; and what the client lets a stream's response send,
# "granted STREAM BYTES": its initial window when the request comes, then each
# WINDOW_UPDATE's increment.
import socket
import ssl
import sys
import threading

import h2.config
import h2.connection
import h2.events
import h2.exceptions
from hyperframe.frame import DataFrame

PATTERN = bytes(range(251))
CHUNK = 4096


def body(size):
    return (PATTERN * (size // len(PATTERN) + 1))[:size]


class Stream:
    def __init__(self, stream_id, items):
        self.id = stream_id
        self.items = items  # ("data", bytes, pad) | ("empty",) | ("end",) | ("trailers", fields)


def plan(path, size):
    """The response's fields and what follows them, or None for a 404."""
    route, _, query = path.partition("?")
    for part in query.split("&"):
        if part.startswith("size="):
            size = int(part[5:])
    data = body(size)
    chunks = [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)]
    length = {"/short": size + 10, "/long": size - 10}.get(route, size)
    fields = [(":status", "200"), ("content-type", "application/octet-stream")]
    # /overflow announces no length: the window, not a content-length, is what it breaks.
    if route not in ("/plain", "/overflow"):
        fields.append(("content-length", str(length)))
    if route == "/padded":
        items = [("data", chunk, i % 256) for i, chunk in enumerate(chunks)] + [("end",)]
    elif route == "/empty-between":
        items = [item for chunk in chunks for item in (("data", chunk, None), ("empty",))] + [("end",)]
    elif route == "/trailers":
        items = [("data", chunk, None) for chunk in chunks] + [("trailers", [("x-checksum", "none")])]
    elif route in ("/plain", "/short", "/long", "/early-hints"):
        items = [("data", chunk, None) for chunk in chunks] + [("end",)]
    elif route == "/overflow":
        items = [("overflow",)]
    else:
        return [(":status", "404"), ("content-length", "0")], None
    return fields, items


def serve(sock):
    config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
    conn = h2.connection.H2Connection(config=config)
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    streams = {}

    def pump():
        for stream in list(streams.values()):
            try:
                send(stream)
            except h2.exceptions.StreamClosedError:
                # The client reset it meanwhile.
                stream.items = []
            if not stream.items:
                del streams[stream.id]
        sock.sendall(conn.data_to_send())

    def send(stream):
        while stream.items:
            item = stream.items[0]
            if item[0] == "data":
                _, chunk, pad = item
                size = len(chunk) + (pad + 1 if pad is not None else 0)
                if conn.local_flow_control_window(stream.id) < size:
                    return
                conn.send_data(stream.id, chunk, pad_length=pad)
            elif item[0] == "empty":
                conn.send_data(stream.id, b"")
            elif item[0] == "end":
                conn.end_stream(stream.id)
            elif item[0] == "trailers":
                conn.send_headers(stream.id, item[1], end_stream=True)
            elif item[0] == "overflow":
                sock.sendall(conn.data_to_send())
                frame = DataFrame(stream.id, data=body(16384)).serialize()
                # Past all the client can ever grant while its reader reads nothing: the
                # initial window, and what the unread bytes fill (the read-ahead and the
                # body sequence's chunks, a few MiB) granted again; 16 MiB more is ample.
                frames = (conn.remote_settings.initial_window_size + (16 << 20)) // 16384
                print(f"overflow {stream.id} {frames * 16384}", flush=True)
                sock.sendall(frame * frames)
            stream.items.pop(0)

    while True:
        try:
            data = sock.recv(65536)
        except (OSError, ssl.SSLError):
            return
        if not data:
            return
        try:
            events = conn.receive_data(data)
        except Exception:
            sock.sendall(conn.data_to_send())
            return
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                fields = dict(event.headers)
                initial = conn.remote_settings.initial_window_size
                print(f"granted {event.stream_id} {initial}", flush=True)
                head, items = plan(fields[":path"], 3 << 20)
                if fields[":path"].startswith("/early-hints"):
                    hints = [(":status", "103"), ("link", "</style.css>; rel=preload; as=style")]
                    conn.send_headers(event.stream_id, hints)
                if fields[":method"] == "HEAD" or items is None:
                    conn.send_headers(event.stream_id, head, end_stream=True)
                else:
                    conn.send_headers(event.stream_id, head)
                    streams[event.stream_id] = Stream(event.stream_id, items)
            elif isinstance(event, h2.events.WindowUpdated) and event.stream_id:
                print(f"granted {event.stream_id} {event.delta}", flush=True)
            elif isinstance(event, h2.events.StreamReset):
                print(f"reset {event.stream_id} {int(event.error_code)}", flush=True)
                streams.pop(event.stream_id, None)
            elif isinstance(event, h2.events.ConnectionTerminated):
                sock.sendall(conn.data_to_send())
                return
        pump()


def main():
    port, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.set_alpn_protocols(["h2"])
    listener = socket.create_server(("127.0.0.1", port))
    while True:
        client, _ = listener.accept()
        try:
            tls = context.wrap_socket(client, server_side=True)
        except (OSError, ssl.SSLError):
            client.close()
            continue

        def run(tls=tls):
            try:
                serve(tls)
            finally:
                tls.close()

        threading.Thread(target=run, daemon=True).start()


main()
