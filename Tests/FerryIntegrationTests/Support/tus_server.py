"""A tus 1.0 server nobody here wrote, for Ferry's tests: tuspyserver's FastAPI router (PyPI
`tuspyserver`) on uvicorn.

    python3 tus_server.py PORT DIRECTORY

The creation endpoint is /files/; each upload is stored in DIRECTORY under its id (the last
path component of its URL), beside tuspyserver's own `.info` file.
"""
import sys

import uvicorn
from fastapi import FastAPI
from tuspyserver import create_tus_router

port, directory = int(sys.argv[1]), sys.argv[2]
app = FastAPI()
app.include_router(create_tus_router(prefix="files", files_dir=directory))
print("listening", flush=True)
uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
