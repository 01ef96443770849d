"""Serve the browser game (``web/``) and one model on localhost: ``play PATH --web``.

Routes (everything else is a static file under ``web/``, directory listings off):

* ``/policy.onnx``: the model. An ONNX file is served as it is; a checkpoint is exported
  once at start-up (with the export's parity check), so the page always runs the
  contract's graph with onnxruntime-web.
* ``/model.json``: ``{"name", "meta", "error"}``. When the model is missing or broken,
  ``error`` is the same one line the terminal commands print, and the page shows it:
  the server still starts, so a person who only looks at the browser learns why.

The page imports onnxruntime-web from ``web/node_modules`` (``npm ci`` in ``web/``), so
nothing comes from a CDN and the game works offline. Binds to 127.0.0.1 only.
"""

from __future__ import annotations

import json
import sys
import tempfile
from functools import partial
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import torch

WEB_DIR = Path(__file__).resolve().parents[2] / "web"
ORT_DIST = Path("node_modules") / "onnxruntime-web" / "dist"


def load_model(path: str | Path) -> tuple[bytes | None, dict]:
    """(ONNX bytes, info) for a policy file; on a bad file (None, info with ``error``)."""
    from .export import ExportError, export
    from .policy_file import PolicyFileError, load_checkpoint, load_onnx

    path = Path(path)
    info: dict = {"name": path.name, "meta": {}, "error": None}
    try:
        if path.suffix == ".ckpt":
            net, meta = load_checkpoint(path)
            with tempfile.TemporaryDirectory() as tmp:
                onnx_path = Path(tmp) / "policy.onnx"
                export(net, onnx_path, meta)
                data = onnx_path.read_bytes()
        else:
            policy, meta = load_onnx(path)
            policy(torch.zeros(1, 9))  # a model that loads but cannot run fails here, not in the page
            data = path.read_bytes()
        info["meta"] = meta
        return data, info
    except (PolicyFileError, ExportError, OSError) as e:
        info["error"] = str(e)
        return None, info


class Handler(SimpleHTTPRequestHandler):
    """Static files from ``web/`` plus the two model routes."""

    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".mjs": "text/javascript",
                      ".js": "text/javascript", ".wasm": "application/wasm",
                      ".onnx": "application/octet-stream"}

    def __init__(self, *args, model: bytes | None, info: dict, **kwargs):
        self.model, self.info = model, info
        super().__init__(*args, **kwargs)

    def end_headers(self) -> None:
        # Cross-origin isolation: the page then gets a fine-grained performance.now()
        # (5 us instead of 100 us in Chromium), which the per-move timing needs. Every file
        # is same-origin, so nothing is blocked.
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        super().end_headers()

    def _send(self, status: HTTPStatus, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")  # a restarted server may serve another model
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        route = self.path.split("?", 1)[0]
        if route == "/model.json":
            self._send(HTTPStatus.OK, json.dumps(self.info).encode(), "application/json")
        elif route == "/policy.onnx":
            if self.model is None:
                self._send(HTTPStatus.NOT_FOUND, (self.info["error"] or "no model").encode(),
                           "text/plain; charset=utf-8")
            else:
                self._send(HTTPStatus.OK, self.model, "application/octet-stream")
        else:
            super().do_GET()

    def list_directory(self, path):  # no directory listings
        self.send_error(HTTPStatus.NOT_FOUND)
        return None

    def log_message(self, format, *args) -> None:  # quiet: the terminal shows the URL only
        pass


def make_server(path: str | Path, port: int = 0, web_dir: Path = WEB_DIR) -> ThreadingHTTPServer:
    """A server for the game and the model at ``path`` on 127.0.0.1:``port`` (0: a free one)."""
    model, info = load_model(path)
    handler = partial(Handler, model=model, info=info, directory=str(web_dir))
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.info = info
    return server


def serve(path: str | Path, port: int = 8000) -> int:
    """``play PATH --web``: serve until Ctrl-C; exit code 0, or 2 if nothing can be served."""
    if not (WEB_DIR / "index.html").is_file():
        print(f"error: the page is not here ({WEB_DIR}); --web runs from a source checkout",
              file=sys.stderr)
        return 2
    try:
        server = make_server(path, port)
    except OSError as e:
        print(f"error: cannot listen on port {port} ({e.strerror or e})", file=sys.stderr)
        return 2
    if server.info["error"]:
        print(f"error: {server.info['error']} (the page will say so too)", file=sys.stderr)
    if not (WEB_DIR / ORT_DIST).is_dir():
        print(f"warning: onnxruntime-web is not installed, so the page cannot play yet: run `npm ci` in "
              f"{WEB_DIR}", file=sys.stderr)
    host, port = server.server_address[:2]
    print(f"Playing {Path(path).name} at http://{host}:{port}/  (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print()
    finally:
        server.server_close()
    return 0
