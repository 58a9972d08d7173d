# A line server that starts and stops TLS in the middle of a connection, on Python's ssl
# (OpenSSL), for the stream-task tests: python3 starttls_echo.py PORT CERT KEY [ignore-close]
#   client: STARTTLS      server: 220 go, then the TLS handshake
#   client: any line      server: the line again, over TLS
#   client: close_notify  server: close_notify, then "plain again" in plaintext, and closes;
#                         with ignore-close, nothing: it waits for the client to close
import socket
import ssl
import sys

port, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ignores_close = sys.argv[4:] == ["ignore-close"]
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)


def read_line(read):
    line = b""
    while not line.endswith(b"\n"):
        byte = read(1)
        if not byte:
            break
        line += byte
    return line


with socket.create_server(("127.0.0.1", port)) as server:
    while True:
        connection, _ = server.accept()
        try:
            if read_line(connection.recv).strip() != b"STARTTLS":
                connection.close()
                continue
            connection.sendall(b"220 go\r\n")
            secure = context.wrap_socket(connection, server_side=True, suppress_ragged_eofs=True)
            line = read_line(secure.recv)
            secure.sendall(line)
            # The client's close_notify ends the TLS stream: answer it, go on in plaintext.
            while secure.recv(4096):
                pass
            if ignores_close:
                while connection.recv(4096):
                    pass
                connection.close()
                continue
            plain = secure.unwrap()
            plain.sendall(b"plain again\r\n")
            plain.close()
        except (OSError, ssl.SSLError):
            connection.close()
