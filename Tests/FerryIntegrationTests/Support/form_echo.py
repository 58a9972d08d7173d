"""A form echo for Ferry's tests: parses multipart/form-data with Werkzeug (an independent
parser) and answers JSON describing every field and file, so tests can compare what
`ferry upload` and `curl -F` send. File parts are hashed, never echoed.

Usage: python3 form_echo.py PORT   (prints "listening" when ready; serves until killed)
"""
import hashlib
import json
import sys

from werkzeug.formparser import parse_form_data
from werkzeug.serving import make_server
from werkzeug.wrappers import Response


def app(environ, start_response):
    length = int(environ.get("CONTENT_LENGTH") or 0)
    stream, form, files = parse_form_data(environ, max_form_memory_size=None)
    fields = [[name, value] for name, value in form.items(multi=True)]
    described = []
    for name, storage in files.items(multi=True):
        digest = hashlib.sha256()
        size = 0
        while True:
            chunk = storage.stream.read(1 << 20)
            if not chunk:
                break
            digest.update(chunk)
            size += len(chunk)
        described.append([name, storage.filename, storage.mimetype, size, digest.hexdigest()])
    body = json.dumps({"contentLength": length, "fields": fields, "files": described}, sort_keys=True)
    return Response(body, content_type="application/json")(environ, start_response)


if __name__ == "__main__":
    server = make_server("127.0.0.1", int(sys.argv[1]), app, threaded=False)
    print("listening", flush=True)
    server.serve_forever()
