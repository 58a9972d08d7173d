"""Uploads a file with Debian's python3-tuspy (tusclient), the second tus client of Ferry's
tests, and prints the upload's URL.

    /usr/bin/python3 tuspy_upload.py CREATION_URL FILE
"""
import os
import sys

from tusclient import client

creation, path = sys.argv[1], sys.argv[2]
uploader = client.TusClient(creation).uploader(
    path, chunk_size=1 << 20, metadata={"filename": os.path.basename(path)}
)
uploader.upload()
print(uploader.url, flush=True)
