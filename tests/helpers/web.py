"""The browser game's server started in the test's own process, and the page opened on it
(shared by tests/web/test_web.py and tests/web/test_web_edges.py)."""

import threading
from contextlib import contextmanager

from ttt_research.web.server import make_server


@contextmanager
def serving(server):
    """``server`` answering from a thread of this process; yields its base URL."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def in_thread(path, node_modules="find"):
    """The same server in this process (no interpreter start-up); yields its base URL.
    ``node_modules=None``: as if onnxruntime-web were not installed (the page asks the server)."""
    with serving(make_server(path, 0, node_modules=node_modules)) as url:
        yield url


def open_game(page, url):
    """Open the game at ``url``; return once the page is ready to play or shows its error."""
    page.goto(url)
    page.wait_for_function("['ready', 'error'].includes(document.getElementById('board').dataset.state)",
                           timeout=30_000)
