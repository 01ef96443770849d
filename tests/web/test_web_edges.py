"""The browser page refuses a model without a legal greedy move somewhere (all -inf logits,
an occupied cell preferred), with one line naming the board, and never plays it: from the
server's own check at start-up (``model.json``'s error), and from the page's check of its
in-browser engine on all 4,520 positions (``rules.js`` ``illegalReason``), which a model
served from elsewhere meets alone. The fixtures are those of tests/web/conftest.py (Debian's
chromium driven by Playwright; the in-browser engine needs ``web/node_modules``).
"""

import math
from contextlib import contextmanager
from functools import partial

import pytest

from tests.helpers.onnx_models import preference_model
from tests.helpers.web import in_thread, open_game, serving
from ttt_research.web.server import PAGE_DIR, Handler, Server, find_node_modules

HIGHEST_FIRST = list(range(9))


@contextmanager
def unchecked(model: bytes, name: str = "bad.onnx"):
    """A server that hands the page ``model`` as it is, without the Python check, as a model
    from another server would come: the page's own check is all there is. Yields the URL."""
    info = {"name": name, "meta": {}, "error": None, "engine": "browser"}
    handler = partial(Handler, model=model, info=info, policy=None, node_modules=find_node_modules(),
                      directory=str(PAGE_DIR))
    with serving(Server(("127.0.0.1", 0), handler)) as url:
        yield url


def refused(tab) -> str:
    """The page's error line, checked to be an error that leaves nothing to click."""
    assert tab.eval_on_selector("#board", "b => b.dataset.state") == "error"
    assert tab.locator("#play-x").is_disabled() and tab.locator("#play-o").is_disabled()
    return tab.inner_text("#error")


@pytest.mark.parametrize("preference,occupied,expected", [
    ([-math.inf] * 9, -1e9, "policy.onnx: the policy has no legal greedy move at 4520 of 4520 "
                            "positions where it moves, first at .../.../... (X to move): every empty "
                            "cell's logit is -inf: it prefers none of them; refused, not played"),
    (HIGHEST_FIRST, 1e9, "policy.onnx: the policy has no legal greedy move at 4519 of 4520 positions "
                         "where it moves, first at X../.../... (O to move): it picks the occupied cell 1 "
                         "(logit 1.000e+9); refused, not played"),
])
def test_the_in_browser_engine_refuses_a_model_without_legal_moves(page, ort_installed, tmp_path,
                                                                   preference, occupied, expected):
    # Before: the page played it (all -inf: the first empty cell, whatever the evaluator said).
    model = preference_model(preference, tmp_path / "bad.onnx", occupied=occupied).read_bytes()
    with unchecked(model) as url:
        open_game(page, url)
        assert refused(page) == expected


@pytest.mark.parametrize("preference,occupied,needle", [
    ([-math.inf] * 9, -1e9, "every empty cell's logit is -inf"),
    (HIGHEST_FIRST, 1e9, "first at X../.../... (O to move): it picks the occupied cell 1"),
])
def test_the_page_shows_the_servers_refusal(page, tmp_path, preference, occupied, needle):
    model = preference_model(preference, tmp_path / "bad.onnx", occupied=occupied)
    for engine in ("find", None):  # in the browser, and asking the server
        with in_thread(model, node_modules=engine) as url:
            open_game(page, url)
            text = refused(page)
        assert text.startswith("The model could not be loaded: ") and "no legal greedy move" in text
        assert needle in text
