# A WebSocket echo server (the `websockets` package from PyPI) for the upgrade tests:
# python3 ws_echo.py PORT
import sys

from websockets.sync.server import serve


def echo(websocket):
    for message in websocket:
        websocket.send(message)


with serve(echo, "127.0.0.1", int(sys.argv[1])) as server:
    server.serve_forever()
