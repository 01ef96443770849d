"""How tests compose configs: the project's own tree (conf/), shrunk by ``debug=tiny``
(4 updates of 512 games, an exact evaluation every 2) and quiet. One place, so a change of
the tiny budget or of how configs are found is made once."""

from __future__ import annotations

from ttt_research.train.confdir import compose

TINY = ["debug=tiny", "progress=false"]  # conf/debug/tiny.yaml: 2,048 games


def make_cfg(*overrides: str, hydra: bool = False):
    """The config of ``python -m ttt_research debug=tiny progress=false OVERRIDES``."""
    return compose([*TINY, *overrides], hydra=hydra)
