"""Serve the browser game and one model on localhost: ``play PATH --web``.

The page (``index.html``, ``app.js``, ``rules.js``, ``style.css``) is package data
(``ttt_research/web/``), so a wheel serves it too. Routes (besides these: only the page's own
files, ``PAGE_FILES``, never the rest of the package folder; directory listings off):

* ``/policy.onnx``: the model. An ONNX file is served as it is; a checkpoint is exported
  once at start-up (with the export's parity check), so the page always runs the
  contract's graph.
* ``/model.json``: ``{"name", "meta", "error", "engine"}``; ``meta`` is the model's metadata,
  whose ``game`` (``"m,n,k"``; none: tic-tac-toe) is the board the page draws. When the model is missing or
  broken, ``error`` is the same one line the terminal commands print, and the page shows it:
  the server still starts, so a person who only looks at the browser learns why. ``engine``
  says where the page runs the model (below).
* ``/node_modules/onnxruntime-web/dist/...``: onnxruntime-web, from a checkout's
  ``web/node_modules`` (``npm ci`` in ``web/``). With it the page runs the model in the
  browser (``engine: "browser"``): nothing comes from a CDN, and the game works offline.
* ``POST /logits`` with ``{"board": [cells: 1 X, -1 O, 0 empty]}`` (m * n cells of the model's
  board, row by row: 9 on tic-tac-toe): ``{"logits": [cells]}``,
  the model's logits for the player to move, ``null`` on occupied cells and wherever the
  logit is -infinity (JSON has none). Without onnxruntime-web (an installed wheel: no
  ``web/node_modules``) the page asks this route for every move (``engine: "server"``), run
  by onnxruntime in Python on the same ONNX bytes.

Binds to 127.0.0.1 only, and answers only requests for itself: a ``Host`` header other than
``localhost`` or ``127.0.0.1`` (any port: an ``ssh -L`` forward changes it) gets a 421, so a
page elsewhere cannot read the server through DNS rebinding (its name made to point at
127.0.0.1; the browser then sends that name). Hostile or broken requests get a 4xx and one
line of text, never a traceback or a dropped connection: a body that is not a small JSON
board (nesting deeper than ``MAX_DEPTH``, more than ``MAX_BODY`` bytes, a ``Content-Length``
that is not a number), NUL bytes in the path, a method other than GET, HEAD and POST. A
connection idle for ``IDLE_TIMEOUT`` seconds is closed, and so is one whose request has not
arrived whole ``REQUEST_DEADLINE`` seconds after the server began reading it (a client that
trickles a byte at a time would hold a thread for ever: it gets a 408 and the connection
closes). The listen backlog (``Server.request_queue_size``) holds a burst of parallel
requests instead of resetting them. A model without a legal greedy
move somewhere is refused at start-up (``policy_file``'s strict check), so the page says why.
"""

from __future__ import annotations

import io
import json
import socket
import sys
import tempfile
import threading
import time
from functools import partial
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, unquote_to_bytes

import numpy as np
import torch

from ttt_research.env.board import TIC_TAC_TOE, Game
from ttt_research.errors import IllegalMoveError
from ttt_research.evaluation import onnx_session
from ttt_research.evaluation.exact import check_logits
from ttt_research.evaluation.onnx import ExportError, export
from ttt_research.evaluation.options import port_number
from ttt_research.evaluation.policy_file import PolicyFileError, game_of, load_checkpoint, onnx_model
from ttt_research.web import position

PAGE_DIR = Path(__file__).resolve().parent  # the page: package data beside this module
# The page's own files, the only ones served from PAGE_DIR: the folder is also the package's,
# and its source (server.py, __init__.py, __pycache__) is nobody's business over HTTP.
PAGE_FILES = ("index.html", "app.js", "rules.js", "style.css")
NOT_SERVED = "not-a-page-file"  # a name in no folder here: what a refused path is mapped to
# onnxruntime-web, where `npm ci` in a checkout's web/ puts it (an installed wheel has none).
NODE_MODULES = Path(__file__).resolve().parents[3] / "web" / "node_modules"
ORT_DIST = Path("onnxruntime-web") / "dist"
ORT_ROUTE = "/node_modules/"
MAX_BODY = 1024  # bytes of a /logits request: a board is ~40
MAX_DEPTH = 4  # nesting of a /logits body: {"board": [...]} is 2; json.loads recurses per level
IDLE_TIMEOUT = 5.0  # seconds a connection may sit silent (between or inside requests)
REQUEST_DEADLINE = 10.0  # seconds a request (line, headers, body) may take to arrive whole
HOSTS = ("localhost", "127.0.0.1")  # the names this server answers to: the address it binds
METHODS = ("GET", "HEAD", "POST")


def load_model(path: str | Path, game: Game | None = None) -> tuple[bytes | None, dict, Game]:
    """(ONNX bytes, info, its board) for a policy file; on a bad file (None, info with
    ``error``, tic-tac-toe). ``game``: the board it must be of (None: the one it names)."""
    path = Path(path)
    info: dict = {"name": path.name, "meta": {}, "error": None}
    try:
        if path.suffix == ".ckpt":
            net, meta = load_checkpoint(path, game)
            board = game_of(path, meta)
            with tempfile.TemporaryDirectory() as tmp:
                onnx_path = Path(tmp) / "policy.onnx"
                export(net, onnx_path, meta, board)
                data = onnx_path.read_bytes()
        else:
            # the bytes checked (every board in a batch and every board alone) are the bytes served
            data, policy, meta = onnx_model(path, played=True, game=game)
            board = game_of(path, meta)
            policy(torch.zeros(1, board.cells))  # one that loads but cannot run fails here, not in the page
        info["meta"] = meta
        return data, info, board
    except (PolicyFileError, ExportError, OSError) as e:
        info["error"] = str(e)
        return None, info, TIC_TAC_TOE


class BadBoard(ValueError):
    """A /logits request whose board is not a position the player to move could face."""


def json_depth(body: bytes) -> int:
    """How deeply arrays and objects nest in ``body`` (brackets inside strings don't count),
    read before ``json.loads``, which recurses once per level."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in body:  # bytes: ints; every byte that matters here is ASCII
        if in_string:
            if escaped:
                escaped = False
            elif ch == 0x5C:  # backslash
                escaped = True
            elif ch == 0x22:  # "
                in_string = False
        elif ch == 0x22:
            in_string = True
        elif ch in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in b"]}":
            depth -= 1
    return deepest


def read_board(body: bytes, game: Game = TIC_TAC_TOE) -> list[int]:
    """The board of a /logits request, checked: a small JSON object (nesting at most
    ``MAX_DEPTH``); ``game.cells`` cells of 1, -1, 0; a position where somebody is to move
    (``position.problem``: X moved first, the game is not over, no impossible lines)."""
    usage = f'send {{"board": [{game.cells} cells: 1 X, -1 O, 0 empty]}}'
    if json_depth(body) > MAX_DEPTH:
        raise BadBoard(f"JSON nested deeper than {MAX_DEPTH} levels: {usage}")
    try:
        board = json.loads(body)["board"]
    except (ValueError, KeyError, TypeError, IndexError, RecursionError) as e:
        raise BadBoard(usage) from e
    if not (isinstance(board, list) and len(board) == game.cells
            and all(type(v) is int and v in (-1, 0, 1) for v in board)):
        raise BadBoard(f"a board is {game.cells} cells, each 1 (X), -1 (O) or 0 (empty); "
                       f"got {str(board)[:80]}")
    problem = position.problem(game, board)
    if problem:  # counts no game has, both sides on a line, a finished game
        raise BadBoard(f"this board is {problem}")
    return board


class ServerPolicy:
    """The served ONNX model, run by onnxruntime in Python: what the page asks for when it
    has no onnxruntime-web of its own."""

    def __init__(self, onnx: bytes, game: Game = TIC_TAC_TOE):
        self.game = game
        # one board at a time: threads cost more than they save; what the model
        # allocates is bounded as for every command (onnx_session)
        self.session = onnx_session.session(onnx, threads=1)
        self.input = self.session.get_inputs()[0].name
        self.lock = threading.Lock()  # the server answers on threads; one run at a time

    def logits(self, board: list[int]) -> list[float | None]:
        """The logits of the player to move (the contract's input: the board from the
        mover's side), ``None`` on occupied cells and for -inf (JSON has no infinities).
        ``IllegalMoveError`` if they give this board no legal greedy move (the strict rule
        of a policy file; ``load_model`` checked every board already)."""
        mover = 1 if board.count(1) == board.count(-1) else -1
        view = np.asarray([[v * mover for v in board]], dtype=np.float32)  # (1, cells)
        with self.lock:
            try:
                (out,) = self.session.run(None, {self.input: view})[:1]
            except Exception as e:  # the model's failure on this board (the arena's bound, ...): one line
                why = onnx_session.refusal(e) or f"failed to run ({str(e).strip()[:160]})"
                raise PolicyFileError(f"the model {why}") from None
        cells = self.game.cells
        row = torch.from_numpy(np.ascontiguousarray(out, dtype=np.float32)).reshape(1, cells)
        check_logits(row, torch.tensor([position.row_of(self.game, board)]), strict=True, game=self.game)
        return [None if board[i] or row[0, i] == -torch.inf else float(row[0, i]) for i in range(cells)]


class TooSlow(TimeoutError):
    """A request that did not arrive whole before its deadline (``DeadlineReader``)."""


class DeadlineReader(io.RawIOBase):
    """A connection's socket, read under a deadline that ``restart`` sets for each request:
    every read waits at most ``IDLE_TIMEOUT`` and never past the deadline, so a client that
    sends a byte now and then cannot keep a request (and its thread) open. ``received``
    counts the bytes of the current request."""

    def __init__(self, sock: socket.socket, idle: float):
        self.sock, self.idle = sock, idle
        self.restart(REQUEST_DEADLINE)

    def restart(self, seconds: float) -> None:
        self.deadline, self.received = time.monotonic() + seconds, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TooSlow("the request did not arrive in time")
        self.sock.settimeout(min(left, self.idle))
        try:
            n = self.sock.recv_into(buffer)
        except TimeoutError:
            if time.monotonic() >= self.deadline:
                raise TooSlow("the request did not arrive in time") from None
            raise  # silent for IDLE_TIMEOUT: the idle close
        finally:
            self.sock.settimeout(self.idle)  # writes keep the plain socket timeout
        self.received += n
        return n


def host_name(header: str) -> str:
    """The host of a ``Host`` header, lower case and without its port (``[::1]:80`` -> ``[::1]``)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header.split("]", 1)[0] + "]"
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class Handler(SimpleHTTPRequestHandler):
    """The page's static files, onnxruntime-web's (when a checkout has them), the model."""

    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".mjs": "text/javascript",
                      ".js": "text/javascript", ".wasm": "application/wasm",
                      ".onnx": "application/octet-stream"}
    timeout = IDLE_TIMEOUT  # socket timeout: an idle or stalled connection is closed
    request_deadline = REQUEST_DEADLINE  # seconds a request may take to arrive (tests shorten it)
    default_request_version = "HTTP/1.0"  # a garbled request line still gets a status line

    def __init__(self, *args, model: bytes | None, info: dict, policy: ServerPolicy | None,
                 node_modules: Path | None, game: Game = TIC_TAC_TOE, **kwargs):
        self.model, self.info, self.policy, self.node_modules = model, info, policy, node_modules
        self.game = game
        super().__init__(*args, **kwargs)

    def setup(self) -> None:
        super().setup()  # the socket timeout, rfile and wfile
        self.rfile.close()  # http.server's reader, replaced (closing it leaves the socket open)
        self.reader = DeadlineReader(self.connection, self.timeout)
        self.rfile = io.BufferedReader(self.reader)

    def handle_one_request(self) -> None:
        """One request under its deadline; one that misses it after sending anything gets a
        408 (a connection merely idle between requests is closed as before, unanswered)."""
        self.reader.restart(self.request_deadline)
        self.answered = False
        try:
            super().handle_one_request()  # http.server closes the connection on a timeout
        finally:
            if time.monotonic() >= self.reader.deadline and self.reader.received and not self.answered:
                self._too_slow()

    def _too_slow(self) -> None:
        self.request_version = self.default_request_version  # the request line may be unread
        self.requestline = self.command = ""
        try:
            self._text(HTTPStatus.REQUEST_TIMEOUT, f"the request took over {self.request_deadline:g} s "
                                                   "to arrive; the connection is closed")
        except OSError:  # the client is gone: nothing to tell it
            self.close_connection = True

    def send_response_only(self, code, message=None) -> None:
        self.answered = True  # whatever answers (ours, or http.server's send_error)
        super().send_response_only(code, message)

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
        if status >= 400:  # the rest of the request (a body not read) must not be taken for the next
            self.close_connection = True
            self._discard_unread()

    def _discard_unread(self, limit: int = 65536) -> None:
        """Read (a bounded part of) what the client is still sending before we close: a socket
        closed with unread data sends a reset, which can destroy the reply in flight."""
        try:
            self.reader.restart(0.2)
            while limit > 0 and (chunk := self.rfile.read1(min(limit, 8192))):
                limit -= len(chunk)
        except OSError:  # a timeout or a reset: nothing more to wait for
            pass

    def parse_request(self) -> bool:
        """http.server's parsing, then what it lets through that we refuse with a 4xx: a
        ``Host`` not ours (DNS rebinding; none at all is an HTTP/1.0 client's right, never a
        browser's), a method we do not serve (it answers 501), NUL bytes in the path (``open``
        would raise)."""
        if not super().parse_request():
            return False
        hosts = self.headers.get_all("Host") or []
        if len(hosts) > 1 or (hosts and host_name(hosts[0]) not in HOSTS):
            shown = ", ".join(hosts)[:80]
            self._text(HTTPStatus.MISDIRECTED_REQUEST, f"this server answers to localhost and 127.0.0.1 "
                                                       f"only, not Host {shown!r}")
            return False
        if self.command not in METHODS:
            self._text(HTTPStatus.METHOD_NOT_ALLOWED, f"{self.command[:20]} is not served: GET, HEAD or POST")
            return False
        if b"\0" in unquote_to_bytes(self.path):
            self._text(HTTPStatus.BAD_REQUEST, "a NUL byte in the path")
            return False
        return True

    def send_head(self):
        # Static files: a path that is no file name (undecodable, too long) is a 404, not a traceback.
        try:
            return super().send_head()
        except (ValueError, OSError):
            self._text(HTTPStatus.NOT_FOUND, "no such file")
            return None

    def translate_path(self, path: str) -> str:
        # onnxruntime-web's files from the checkout's node_modules; the page's own files
        # (PAGE_FILES, "/" meaning index.html) from the page; any other path is no file (404).
        route = path.split("?", 1)[0].split("#", 1)[0]
        if self.node_modules is not None and route.startswith(ORT_ROUTE + ORT_DIST.as_posix() + "/"):
            name = route[len(ORT_ROUTE + ORT_DIST.as_posix() + "/"):]
            if name and "/" not in name and not name.startswith("."):
                return str(self.node_modules / ORT_DIST / name)
            return str(self.node_modules / ORT_DIST / "missing")
        name = unquote(route).removeprefix("/") or "index.html"  # %2E and the like decoded first
        return str(PAGE_DIR / (name if name in PAGE_FILES else NOT_SERVED))

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
        text = (self.headers.get("Content-Length") or "").strip()
        # ASCII digits only: "abc", "-5", "1e3", "" and "\xb2" (a digit to str.isdigit) are refused.
        length = int(text) if text.isascii() and text.isdigit() else -1
        if not 0 < length <= MAX_BODY:
            return self._text(HTTPStatus.BAD_REQUEST, f"send a JSON board of at most {MAX_BODY} bytes, "
                                                      f"with its Content-Length (got {text[:20]!r})")
        body = self.rfile.read(length)
        if len(body) < length:  # the client closed before sending what it announced
            self.close_connection = True
            return None
        try:
            board = read_board(body, self.game)
        except BadBoard as e:
            return self._text(HTTPStatus.BAD_REQUEST, str(e))
        try:
            logits = self.policy.logits(board)
        except (IllegalMoveError, PolicyFileError) as e:  # the model's fault, not the request's
            return self._text(HTTPStatus.INTERNAL_SERVER_ERROR, str(e))
        body = json.dumps({"logits": logits}, allow_nan=False).encode()  # never -Infinity or NaN
        self._send(HTTPStatus.OK, body, "application/json")

    def list_directory(self, path):  # no directory listings
        self._text(HTTPStatus.NOT_FOUND, "no such file")
        return None

    def log_message(self, format, *args) -> None:  # quiet: the terminal shows the URL only
        pass


def find_node_modules() -> Path | None:
    """A checkout's ``web/node_modules`` with onnxruntime-web in it, or None."""
    return NODE_MODULES if (NODE_MODULES / ORT_DIST).is_dir() else None


class Server(ThreadingHTTPServer):
    """A thread per connection, a listen backlog for bursts, and quiet about clients that
    go away (a reset or a timeout is theirs; the default prints a traceback)."""

    request_queue_size = 128  # socketserver's default is 5: a burst of 100 got 14-21 resets
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError):
            return
        print(f"error: a request from {client_address[0]} failed ({type(error).__name__}: "
              f"{' '.join(str(error).split())[:160]})", file=sys.stderr)


def make_server(path: str | Path, port: int = 0,
                node_modules: Path | None | str = "find", game: Game | None = None) -> Server:
    """A server for the game and the model at ``path`` on 127.0.0.1:``port`` (0: a free one).
    ``node_modules``: where onnxruntime-web is (``"find"``: a checkout's, if installed; None:
    nowhere, so the page asks the server for moves). ``game``: the board the model must be of
    (None: the one it names; the page draws it)."""
    node = find_node_modules() if node_modules == "find" else node_modules
    model, info, board = load_model(path, game)
    policy = None
    if model is not None:
        try:
            policy = ServerPolicy(model, board)
        except Exception as e:  # onnxruntime's own errors: the file loaded in torch's check but not here
            info["error"], model = f"{Path(path).name}: onnxruntime cannot run it ({e})", None
    info["engine"] = "browser" if node is not None else "server"
    handler = partial(Handler, model=model, info=info, policy=policy, node_modules=node, game=board,
                      directory=str(PAGE_DIR))
    server = Server(("127.0.0.1", port_number(port)), handler)
    server.info = info
    return server


def serve(path: str | Path, port: int = 8000, game: Game | None = None) -> int:
    """``play PATH --web``: serve until Ctrl-C; exit code 0, or 2 if nothing can be served: a
    missing or broken model (one line; the page explains one that breaks while it is served) or
    a port taken (a bad ``port`` raises ``UserError``: one line, exit 2, from ``play``'s ``command``)."""
    port = port_number(port)
    if not (PAGE_DIR / "index.html").is_file():
        print(f"error: the page is missing from the package ({PAGE_DIR}); reinstall ttt_research",
              file=sys.stderr)
        return 2
    try:
        server = make_server(path, port, game=game)
    except OSError as e:
        print(f"error: cannot listen on port {port} ({e.strerror or e})", file=sys.stderr)
        return 2
    if server.info["error"]:  # a mistyped path or a broken file: refused, as `play` refuses it
        server.server_close()
        print(f"error: {server.info['error']}", file=sys.stderr)
        return 2
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
