"""The ``play --web`` server under bad requests: every malformed request gets a 4xx and a
line of text, never a traceback on stderr or a dropped connection; idle connections are
closed, a request trickled in is cut at its deadline with a 408, another ``Host`` gets a
421; a burst of 100 parallel POSTs is answered in full; ``--port`` is checked; a model
without a legal greedy move is refused at start-up and ``/logits`` never sends -Infinity.

Everything talks to 127.0.0.1 only, with raw sockets where urllib would tidy the request,
and every loop and read is bounded by a timeout.
"""

import json
import math
import select
import socket
import sys
import threading
import time
from contextlib import contextmanager

import pytest

from tests.helpers.onnx_models import allocating_model, batch_switch_model, preference_model
from ttt_research.play import main as play_main
from ttt_research.web import server as serve
from ttt_research.web.server import make_server

HIGHEST_FIRST = list(range(9))
BOARD = json.dumps({"board": [0] * 9}).encode()


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """The highest-empty-cell policy as an ONNX file."""
    return preference_model(HIGHEST_FIRST, tmp_path_factory.mktemp("m") / "highest.onnx")


@contextmanager
def running(path):
    """The server in a thread, the page asking it for moves; yields (host, port)."""
    server = make_server(path, 0, node_modules=None)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[:2]
    finally:
        server.shutdown()
        server.server_close()


def exchange(address, request: bytes, timeout: float = 20.0) -> bytes:
    """Send ``request`` as is and read the reply until the server closes the connection."""
    with socket.create_connection(address, timeout=timeout) as s:
        s.sendall(request)
        s.shutdown(socket.SHUT_WR)  # nothing more is coming: a short body is not waited for
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    return reply


def status_and_body(reply: bytes) -> tuple[int, str]:
    assert reply, "the connection was dropped without a reply"
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode(errors="replace")


def post(body: bytes, length: str | None = None, path: str = "/logits") -> bytes:
    length = str(len(body)) if length is None else length
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n").encode("latin-1") + body  # as headers travel


@pytest.mark.parametrize("request_bytes,status,needle", [
    (post(b"[" * 1000), 400, "JSON nested deeper than 4 levels"),   # before: RecursionError, no reply
    (post(b'{"board": ' + b"[" * 400 + b"]" * 400 + b"}"), 400, "JSON nested deeper"),
    (post(BOARD, "abc"), 400, "with its Content-Length (got 'abc')"),  # before: ValueError, no reply
    (post(BOARD, "-5"), 400, "(got '-5')"),
    (post(BOARD, "1e3"), 400, "(got '1e3')"),
    (post(BOARD, "\xb2"), 400, "(got '\xb2')"),  # a digit to str.isdigit, not to int()
    (post(BOARD, str(10**12)), 400, "at most 1024 bytes"),
    (post(b'{"board": [NaN, 0, 0, 0, 0, 0, 0, 0, 0]}'), 400, "a board is 9 cells"),
    (post(b'{"board": [1e999, 0, 0, 0, 0, 0, 0, 0, 0]}'), 400, "a board is 9 cells"),
    (post(b'["board"]'), 400, 'send {"board"'),
    # Boards no game reaches (issue 42 item 5): once answered 200 with logits.
    (post(b'{"board": [1, 1, 1, -1, -1, -1, 0, 0, 0]}'), 400, "impossible: both x and o have three in a row"),
    (post(b'{"board": [1, 1, 1, -1, -1, 0, -1, 0, 0]}'), 400, "x has three in a row, yet o moved after"),
    (post(b"\xff\xfe"), 400, 'send {"board"'),
    (b"GET /%00 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400, "a NUL byte in the path"),  # before: ValueError
    (b"GET /index.html%00.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400, "a NUL byte in the path"),
    (b"GET /\x00 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400, "a NUL byte in the path"),
    (b"HEAD /%00 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400, ""),
    (b"GET /%ff%fe HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404, ""),  # not UTF-8: no such file
    (b"GET /node_modules/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404, ""),
    (b"PUT /logits HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n", 405, "GET, HEAD or POST"),
    (b"DELETE / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 405, "GET, HEAD or POST"),
    (b"GARBAGE\r\n\r\n", 400, ""),
], ids=lambda v: None if isinstance(v, bytes) and len(v) > 60 else repr(v)[:40])
def test_a_malformed_request_gets_a_4xx_and_no_traceback(model, capfd, request_bytes, status, needle):
    with running(model) as address:
        got, body = status_and_body(exchange(address, request_bytes))
        assert (got, needle in body) == (status, True), body
        # The server goes on answering afterwards.
        ok, answer = status_and_body(exchange(address, post(BOARD)))
        assert ok == 200 and json.loads(answer)["logits"][8] == 8.0
    err = capfd.readouterr().err
    assert "Traceback" not in err and err == ""


def get(address, path: str) -> tuple[int, str]:
    return status_and_body(exchange(address, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()))


def test_only_the_pages_own_files_are_served_never_the_packages_source(model, capfd):
    # Issue 42 item 6: the page's folder is the package's, and /server.py was once a 200.
    with running(model) as address:
        for path in ["/", "/index.html", "/app.js", "/rules.js", "/style.css", "/app.js?v=1"]:
            assert get(address, path)[0] == 200, path
        for path in ["/server.py", "/__init__.py", "/%73erver.py", "/./server.py", "//server.py",
                     "/__pycache__/", f"/__pycache__/server.{sys.implementation.cache_tag}.pyc",
                     "/web/server.py", "/../web/server.py", "/index.html/"]:
            status, body = get(address, path)
            assert status == 404 and "import" not in body, path
    assert capfd.readouterr().err == ""


def test_a_body_shorter_than_its_length_is_dropped_quietly(model, capfd):
    with running(model) as address:
        reply = exchange(address, post(b'{"bo', length="40"))  # the client gives up after 4 bytes
        assert reply == b""  # nothing to answer: the client has gone
        assert status_and_body(exchange(address, post(BOARD)))[0] == 200
    assert capfd.readouterr().err == ""


@pytest.mark.slow  # over 3 s on the 2-core host: the fast subset (-m "not slow") skips it
def test_an_idle_connection_is_closed_within_a_few_seconds(model, capfd):
    # Before: an idle connection was held open forever (a thread each, no timeout).
    with running(model) as address:
        for opening in (b"", b"POST /logits HTTP/1.1\r\nContent-Length: 40\r\n\r\n{"):
            with socket.create_connection(address, timeout=15) as s:
                s.sendall(opening)
                start = time.monotonic()
                assert s.recv(1024) == b""  # closed by the server, with nothing sent
                waited = time.monotonic() - start
            assert 4 < waited < 10  # IDLE_TIMEOUT is 5 s
    assert capfd.readouterr().err == ""
    assert serve.Handler.timeout == serve.IDLE_TIMEOUT <= 10


def trickle(address, data: bytes, every: float, give_up: float) -> tuple[bytes, float]:
    """Send ``data`` a byte at a time, one each ``every`` seconds, until the server answers or
    closes (then read to the end) or ``give_up`` seconds pass; (what came back, when)."""
    start = time.monotonic()
    with socket.create_connection(address, timeout=give_up) as s:
        for byte in data:
            if select.select([s], [], [], every)[0]:  # the server spoke or closed: stop sending
                break
            if time.monotonic() - start > give_up:
                return b"still open", time.monotonic() - start
            s.sendall(bytes([byte]))
        else:
            select.select([s], [], [], give_up)
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    return reply, time.monotonic() - start


@pytest.mark.parametrize("request_bytes", [
    b"GET /index.html HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 200,   # the headers trickle
    post(BOARD)[:-5] + b" " * 200,                                           # the body trickles
], ids=["headers", "body"])
@pytest.mark.alone  # it times the server's cut: a loaded core would blur it
def test_a_request_that_trickles_in_is_cut_at_its_deadline_with_a_408(model, capfd, monkeypatch,
                                                                      request_bytes):
    # Issue 58 item 15: a byte every 0.25 s kept a request (and its thread) open for ever: the
    # idle timeout (5 s) restarts at every byte. Now the whole request has a deadline (1 s here).
    assert getattr(serve.Handler, "request_deadline", None) == serve.REQUEST_DEADLINE <= 10
    monkeypatch.setattr(serve.Handler, "request_deadline", 1.0, raising=False)
    with running(model) as address:
        reply, took = trickle(address, request_bytes, every=0.25, give_up=6.0)
        assert reply != b"still open", f"the server still read the request after {took:.1f} s"
        status, body = status_and_body(reply)
        assert (status, body) == (408, "the request took over 1 s to arrive; the connection is closed")
        assert 0.9 < took < 4  # the deadline, not the idle timeout
        assert status_and_body(exchange(address, post(BOARD)))[0] == 200  # and it answers on
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize("host", ["evil.example:8000", "evil.example", "localhost.evil.example",
                                  "127.0.0.1.nip.io:80", "[::1]:8000", "", "127.0.0.1\r\nHost: evil.example"])
def test_a_request_for_another_host_is_refused(model, capfd, host):
    # Issue 58 item 15: any Host was answered, so a page at evil.example whose name was rebound
    # to 127.0.0.1 (DNS rebinding) could read the model and ask /logits as a same-origin page.
    with running(model) as address:
        for request in (f"GET /policy.onnx HTTP/1.1\r\nHost: {host}\r\n\r\n".encode(),
                        post(BOARD).replace(b"Host: 127.0.0.1", f"Host: {host}".encode())):
            status, body = status_and_body(exchange(address, request))
            assert status == 421 and body.startswith("this server answers to localhost and 127.0.0.1 only, "
                                                      "not Host "), body
    assert capfd.readouterr().err == ""


def test_its_own_names_are_answered_with_any_port_and_without_a_host(model):
    with running(model) as address:
        port = address[1]
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", "127.0.0.1", "localhost:9000"):
            request = f"GET /model.json HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
            assert status_and_body(exchange(address, request))[0] == 200, host
        assert status_and_body(exchange(address, b"GET /model.json HTTP/1.0\r\n\r\n"))[0] == 200
    assert serve.host_name("[::1]:8000") == "[::1]" and serve.host_name("Example.COM") == "example.com"


def test_a_hundred_parallel_posts_are_all_answered_correctly(model, capfd):
    # Before: a listen backlog of 5, and 14-21 of the 100 connections were reset.
    boards = [[0] * 9, [1, 0, 0, 0, 0, 0, 0, 0, 0], [1, -1, 0, 0, 0, 0, 0, 0, 0]]
    results: list = [None] * 100
    with running(model) as address:
        start = threading.Barrier(100, timeout=60)

        def one(k: int) -> None:
            board = boards[k % 3]
            start.wait()  # all connect at once
            try:
                results[k] = status_and_body(exchange(address, post(json.dumps({"board": board}).encode())))
            except OSError as e:  # a reset: what the test is about
                results[k] = e

        threads = [threading.Thread(target=one, args=(k,)) for k in range(100)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    for k, result in enumerate(results):
        assert isinstance(result, tuple), f"request {k}: {result!r}"
        status, body = result
        board = boards[k % 3]
        expected = [None if board[i] else float(i) for i in range(9)]  # the cell index, None if taken
        assert status == 200 and json.loads(body)["logits"] == expected
    assert capfd.readouterr().err == ""
    assert serve.Server.request_queue_size >= 100


@pytest.mark.parametrize("port", ["99999", "abc", "-1", "65536"])
def test_a_bad_port_is_one_line_and_exit_2(model, capsys, port):
    # Before: 99999 was an OverflowError traceback; abc two lines of argparse usage.
    assert play_main([str(model), "--web", "--port", port]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (f"error: --port must be an integer from 0 to 65535 (0: any free port), "
                                 f"got '{port}'\n")


def test_logits_are_json_without_infinities(tmp_path):
    # -inf on cell 1 (empty, never chosen here: cell 9 is the largest). JSON has no -Infinity,
    # so the cell is null, as an occupied cell is. Before: -inf went out as -Infinity. (The
    # server itself would refuse this model: with cell 1 the only empty one it has no legal
    # move, so its route is checked on the model's runner.)
    model = preference_model([-math.inf] + HIGHEST_FIRST[1:], tmp_path / "minus.onnx")
    logits = serve.ServerPolicy(model.read_bytes()).logits([0] * 9)

    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    body = json.dumps({"logits": logits})
    assert json.loads(body, parse_constant=refuse)["logits"] == [None, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]


@pytest.mark.parametrize("preference,occupied,needle", [
    ([-math.inf] * 9, -1e9, "every empty cell's logit is -inf"),
    (HIGHEST_FIRST, 1e9, "first at X../.../... (O to move): it picks the occupied cell 1"),
])
def test_a_model_without_legal_moves_is_refused_at_start_up(tmp_path, preference, occupied, needle):
    # Before: served, and /logits answered -Infinity (all -inf) or played on.
    model = preference_model(preference, tmp_path / "bad.onnx", occupied=occupied)
    with running(model) as address:
        info = json.loads(status_and_body(exchange(address, b"GET /model.json HTTP/1.0\r\n\r\n"))[1])
        status, body = status_and_body(exchange(address, post(BOARD)))
    assert needle in info["error"] and "no legal greedy move" in info["error"]
    assert status == 404 and needle in body


def test_a_model_that_plays_another_policy_alone_is_not_served(tmp_path):
    # Issue 58 item 2: before, model.json served the copied eval report of the batched policy
    # while /logits (a board at a time) played the other one.
    model = batch_switch_model(tmp_path / "switch.onnx", HIGHEST_FIRST, HIGHEST_FIRST[::-1],
                               {"eval": json.dumps({"x_random_loss": 0.0})})
    with running(model) as address:
        info = json.loads(status_and_body(exchange(address, b"GET /model.json HTTP/1.0\r\n\r\n"))[1])
        status, body = status_and_body(exchange(address, post(BOARD)))
    assert info["meta"] == {} and "the model plays differently by batch" in info["error"]
    assert status == 404 and "the model plays differently by batch" in body


def test_a_model_that_fails_on_a_board_is_one_line(tmp_path):
    # A run the bounded arena stops (here on every board; a file the start-up checks passed
    # could do so on one): one line, which POST /logits answers with a 500.
    data = allocating_model(tmp_path / "big.onnx", 2 << 30, "Expand").read_bytes()
    with pytest.raises(serve.PolicyFileError) as e:
        serve.ServerPolicy(data).logits([0] * 9)
    assert str(e.value) == ("the model asked for 2.0 GiB in its Expand node, beyond the 1 GiB a policy "
                            "may use while it runs")


def test_the_depth_scan_ignores_brackets_inside_strings():
    assert serve.json_depth(b'{"board": [0, 0]}') == 2
    assert serve.json_depth(b'{"a": "[[[[[[\\"[[[[["}') == 1
    assert serve.json_depth(b"[" * 1000) == 1000
