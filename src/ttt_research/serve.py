"""Serve the browser game and one model on localhost: ``play PATH --web``.

The page (``index.html``, ``app.js``, ``rules.js``, ``style.css``) is package data
(``ttt_research/web/``), so a wheel serves it too. Routes (everything else is a static file of
the page; directory listings off):

* ``/policy.onnx``: the model. An ONNX file is served as it is; a checkpoint is exported
  once at start-up (with the export's parity check), so the page always runs the
  contract's graph.
* ``/model.json``: ``{"name", "meta", "error", "engine"}``. When the model is missing or
  broken, ``error`` is the same one line the terminal commands print, and the page shows it:
  the server still starts, so a person who only looks at the browser learns why. ``engine``
  says where the page runs the model (below).
* ``/node_modules/onnxruntime-web/dist/...``: onnxruntime-web, from a checkout's
  ``web/node_modules`` (``npm ci`` in ``web/``). With it the page runs the model in the
  browser (``engine: "browser"``): nothing comes from a CDN, and the game works offline.
* ``POST /logits`` with ``{"board": [9 cells: 1 X, -1 O, 0 empty]}``: ``{"logits": [9]}``,
  the model's logits for the player to move, ``null`` on occupied cells (JSON has no
  -infinity). Without onnxruntime-web (an installed wheel: no ``web/node_modules``) the page
  asks this route for every move (``engine: "server"``), run by onnxruntime in Python on the
  same ONNX bytes.

Binds to 127.0.0.1 only.
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
from functools import partial
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import torch

from . import game

PAGE_DIR = Path(__file__).resolve().parent / "web"  # the page: package data
# onnxruntime-web, where `npm ci` in a checkout's web/ puts it (an installed wheel has none).
NODE_MODULES = Path(__file__).resolve().parents[2] / "web" / "node_modules"
ORT_DIST = Path("onnxruntime-web") / "dist"
ORT_ROUTE = "/node_modules/"
MAX_BODY = 1024  # bytes of a /logits request: a board is ~40


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


class BadBoard(ValueError):
    """A /logits request whose board is not a position the player to move could face."""


def read_board(body: bytes) -> list[int]:
    """The board of a /logits request, checked: 9 cells of 1, -1, 0; X moved first; the game
    is not over."""
    try:
        board = json.loads(body)["board"]
    except (ValueError, KeyError, TypeError) as e:
        raise BadBoard('send {"board": [9 cells: 1 X, -1 O, 0 empty]}') from e
    if not (isinstance(board, list) and len(board) == 9
            and all(type(v) is int and v in (-1, 0, 1) for v in board)):
        raise BadBoard(f"a board is 9 cells, each 1 (X), -1 (O) or 0 (empty); got {str(board)[:80]}")
    if board.count(1) - board.count(-1) not in (0, 1):
        raise BadBoard("X moves first: X has as many pieces as O, or one more")
    cells = torch.tensor([board], dtype=torch.int8)
    if int(game.winner(cells)[0]) != 0 or 0 not in board:
        raise BadBoard("the game on this board is over: there is no move to choose")
    return board


class ServerPolicy:
    """The served ONNX model, run by onnxruntime in Python: what the page asks for when it
    has no onnxruntime-web of its own."""

    def __init__(self, onnx: bytes):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1  # one 9-cell board at a time: threads cost more than they save
        self.session = ort.InferenceSession(onnx, opts, providers=["CPUExecutionProvider"])
        self.input = self.session.get_inputs()[0].name
        self.lock = threading.Lock()  # the server answers on threads; one run at a time

    def logits(self, board: list[int]) -> list[float | None]:
        """The logits of the player to move (the contract's input: the board from the
        mover's side), ``None`` on occupied cells."""
        mover = 1 if board.count(1) == board.count(-1) else -1
        view = np.asarray([[v * mover for v in board]], dtype=np.float32)  # (1, 9)
        with self.lock:
            (out,) = self.session.run(None, {self.input: view})[:1]
        return [None if board[i] else float(out[0, i]) for i in range(9)]


class Handler(SimpleHTTPRequestHandler):
    """The page's static files, onnxruntime-web's (when a checkout has them), the model."""

    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".mjs": "text/javascript",
                      ".js": "text/javascript", ".wasm": "application/wasm",
                      ".onnx": "application/octet-stream"}

    def __init__(self, *args, model: bytes | None, info: dict, policy: ServerPolicy | None,
                 node_modules: Path | None, **kwargs):
        self.model, self.info, self.policy, self.node_modules = model, info, policy, node_modules
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

    def _text(self, status: HTTPStatus, message: str) -> None:
        self._send(status, message.encode(), "text/plain; charset=utf-8")

    def translate_path(self, path: str) -> str:
        # onnxruntime-web's files from the checkout's node_modules; everything else from the page.
        route = path.split("?", 1)[0].split("#", 1)[0]
        if self.node_modules is not None and route.startswith(ORT_ROUTE + ORT_DIST.as_posix() + "/"):
            name = route[len(ORT_ROUTE + ORT_DIST.as_posix() + "/"):]
            if name and "/" not in name and not name.startswith("."):
                return str(self.node_modules / ORT_DIST / name)
            return str(self.node_modules / ORT_DIST / "missing")
        return super().translate_path(path)

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        route = self.path.split("?", 1)[0]
        if route == "/model.json":
            self._send(HTTPStatus.OK, json.dumps(self.info).encode(), "application/json")
        elif route == "/policy.onnx":
            if self.model is None:
                self._text(HTTPStatus.NOT_FOUND, self.info["error"] or "no model")
            else:
                self._send(HTTPStatus.OK, self.model, "application/octet-stream")
        else:
            super().do_GET()

    def do_POST(self) -> None:  # noqa: N802
        if self.path.split("?", 1)[0] != "/logits":
            return self._text(HTTPStatus.NOT_FOUND, "POST goes to /logits only")
        if self.policy is None:
            return self._text(HTTPStatus.NOT_FOUND, self.info["error"] or "no model")
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 < length <= MAX_BODY:
            return self._text(HTTPStatus.BAD_REQUEST, f"send a JSON board of at most {MAX_BODY} bytes")
        try:
            board = read_board(self.rfile.read(length))
        except BadBoard as e:
            return self._text(HTTPStatus.BAD_REQUEST, str(e))
        body = json.dumps({"logits": self.policy.logits(board)}).encode()
        self._send(HTTPStatus.OK, body, "application/json")

    def list_directory(self, path):  # no directory listings
        self.send_error(HTTPStatus.NOT_FOUND)
        return None

    def log_message(self, format, *args) -> None:  # quiet: the terminal shows the URL only
        pass


def find_node_modules() -> Path | None:
    """A checkout's ``web/node_modules`` with onnxruntime-web in it, or None."""
    return NODE_MODULES if (NODE_MODULES / ORT_DIST).is_dir() else None


def make_server(path: str | Path, port: int = 0,
                node_modules: Path | None | str = "find") -> ThreadingHTTPServer:
    """A server for the game and the model at ``path`` on 127.0.0.1:``port`` (0: a free one).
    ``node_modules``: where onnxruntime-web is (``"find"``: a checkout's, if installed; None:
    nowhere, so the page asks the server for moves)."""
    node = find_node_modules() if node_modules == "find" else node_modules
    model, info = load_model(path)
    policy = None
    if model is not None:
        try:
            policy = ServerPolicy(model)
        except Exception as e:  # onnxruntime's own errors: the file loaded in torch's check but not here
            info["error"], model = f"{Path(path).name}: onnxruntime cannot run it ({e})", None
    info["engine"] = "browser" if node is not None else "server"
    handler = partial(Handler, model=model, info=info, policy=policy, node_modules=node,
                      directory=str(PAGE_DIR))
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.info = info
    return server


def serve(path: str | Path, port: int = 8000) -> int:
    """``play PATH --web``: serve until Ctrl-C; exit code 0, or 2 if nothing can be served."""
    if not (PAGE_DIR / "index.html").is_file():
        print(f"error: the page is missing from the package ({PAGE_DIR}); reinstall ttt_research",
              file=sys.stderr)
        return 2
    try:
        server = make_server(path, port)
    except OSError as e:
        print(f"error: cannot listen on port {port} ({e.strerror or e})", file=sys.stderr)
        return 2
    if server.info["error"]:
        print(f"error: {server.info['error']} (the page will say so too)", file=sys.stderr)
    if server.info["engine"] == "server":
        print("note: onnxruntime-web is not installed (`npm ci` in a checkout's web/), so the page "
              "asks this server for each move (onnxruntime in Python)", file=sys.stderr)
    host, port = server.server_address[:2]
    print(f"Playing {Path(path).name} at http://{host}:{port}/  (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print()
    finally:
        server.server_close()
    return 0
