# A WebSocket echo server (the `websockets` package from PyPI) for the upgrade tests:
#   python3 ws_echo.py PORT [--basic USER:PASSWORD] [--redirect-from PATH] [--tls CERT KEY]
# --basic asks for HTTP Basic credentials (websockets' own basic_auth); --redirect-from
# answers a GET of PATH with a 302 to /; --tls serves wss with the PEM certificate and key.
import argparse
import http
import ssl

from websockets.sync.server import basic_auth, serve

arguments = argparse.ArgumentParser()
arguments.add_argument("port", type=int)
arguments.add_argument("--basic")
arguments.add_argument("--redirect-from")
arguments.add_argument("--tls", nargs=2)
options = arguments.parse_args()


def echo(websocket):
    for message in websocket:
        websocket.send(message)


def redirect(connection, request):
    if options.redirect_from and request.path == options.redirect_from:
        response = connection.respond(http.HTTPStatus.FOUND, "moved to /\n")
        response.headers["Location"] = "/"
        return response
    return None


hooks = [redirect]
if options.basic:
    user, password = options.basic.split(":", 1)
    hooks.append(basic_auth(realm="echo", credentials=(user, password)))


def process_request(connection, request):
    for hook in hooks:
        response = hook(connection, request)
        if response is not None:
            return response
    return None


context = None
if options.tls:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(options.tls[0], options.tls[1])

with serve(echo, "127.0.0.1", options.port, process_request=process_request, ssl=context) as server:
    server.serve_forever()
