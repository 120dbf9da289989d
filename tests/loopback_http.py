"""A loopback HTTP server for fetch tests: 127.0.0.1 only, in a daemon thread, and it stops itself.

It serves one archive at ``/<name>`` with a strong ETag and a Last-Modified date derived from the payload, honours
``Range`` and ``If-Range`` as RFC 9110 says (a validator that no longer matches gets the whole file with 200), can
drop the first response mid-body, and logs each request's Range and If-Range. ``upstream_files`` gives the files
of a mirror of the data registry's upstream paths, rebuilt from the shared data.
"""

from __future__ import annotations

import hashlib
import lzma
import threading
import zipfile
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from antlm_bench.data.sources import load_registry


class Server:
    def __init__(self, payload: bytes, name: str = "data.tar.gz", cut_first_after: int | None = None,
                 honour_range: bool = True, validators: bool = True, lifetime_s: float = 60.0,
                 paths: dict[str, bytes] | None = None) -> None:
        self.files = dict(paths or {})
        self.files.setdefault("/" + name, payload)
        self.name = name
        self.cut_first_after, self.honour_range, self.validators = cut_first_after, honour_range, validators
        self.requests: list[str | None] = []  # the Range header of each request (None: a plain GET)
        self.if_ranges: list[str | None] = []
        self.paths: list[str] = []
        self.versions = 0  # bumped by set_payload: a new Last-Modified date
        server = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 10  # a stuck client cannot hold a handler thread forever

            def log_message(self, *args: object) -> None:  # keep the test output clean
                pass

            def do_GET(self) -> None:  # noqa: N802  (http.server's name)
                server.requests.append(self.headers.get("Range"))
                server.if_ranges.append(self.headers.get("If-Range"))
                server.paths.append(self.path)
                body = server.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                etag, modified = server.etag(body), formatdate(1_700_000_000 + server.versions, usegmt=True)
                status, start = 200, 0
                wanted, condition = self.headers.get("Range"), self.headers.get("If-Range")
                if wanted and server.honour_range and (condition is None or condition in (etag, modified)):
                    start = int(wanted.removeprefix("bytes=").rstrip("-"))
                    if start >= len(body):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(body)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    status = 206
                part = body[start:]
                self.send_response(status)
                self.send_header("Content-Length", str(len(part)))
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                if server.validators:
                    self.send_header("ETag", etag)
                    self.send_header("Last-Modified", modified)
                self.end_headers()
                if server.cut_first_after is not None and len(server.requests) == 1:
                    self.wfile.write(part[: server.cut_first_after])
                    self.wfile.flush()
                    self.connection.shutdown(2)  # drop the connection mid-body
                    return
                self.wfile.write(part)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.url = f"{self.base}/{name}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        # a test that hangs or forgets __exit__ still frees the port: the server stops itself after lifetime_s
        self.watchdog = threading.Timer(lifetime_s, self.httpd.shutdown)
        self.watchdog.daemon = True

    @staticmethod
    def etag(body: bytes) -> str:
        return '"' + hashlib.sha256(body).hexdigest()[:16] + '"'

    def set_payload(self, payload: bytes, name: str | None = None) -> None:
        """The file at the URL changes: new bytes, new ETag, new Last-Modified."""
        self.files["/" + (name or self.name)] = payload
        self.versions += 1

    def __enter__(self) -> Server:
        self.thread.start()
        self.watchdog.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.watchdog.cancel()
        self.httpd.shutdown()
        self.httpd.server_close()


def upstream_files(real: Path) -> dict[str, bytes]:
    """URL path -> the upstream file's bytes, rebuilt from the shared data (xz undone, EWoK read from its zip in
    memory). Pretraining text is not served: the shared folder holds only snippets of those files."""
    served: dict[str, bytes] = {}
    with zipfile.ZipFile(real / "ewok_filtered.zip") as ewok:
        for item in load_registry():
            archive, _, member = item.dest.partition("::")
            if member:
                payload = ewok.read(member, pwd=b"ewok")
            elif (real / (item.dest + ".xz")).is_file():
                payload = lzma.decompress((real / (item.dest + ".xz")).read_bytes())
            elif (real / item.dest).is_file() and not item.dest.startswith("pretrain_sample/"):
                payload = (real / item.dest).read_bytes()
            else:
                continue
            served[f"/{item.repo}/{item.commit}/{item.path}"] = payload
    return served
