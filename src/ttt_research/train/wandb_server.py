"""Whether W&B can go online from here: its server (``WANDB_BASE_URL``), an API key for it, and
a server that answers within two seconds. Standard library only: the training run asks it
for ``logger.wandb.mode: auto`` (``tracking.py``) and the dashboard command before it saves
a workspace, without loading wandb or Lightning.
"""

from __future__ import annotations

import netrc
import os
import socket
from urllib.parse import urlparse


def wandb_mode(requested: str = "auto") -> str:
    """``online`` only with an API key and a server that answers; else ``offline``.

    An explicit ``WANDB_MODE`` in the environment wins over ``auto``, as W&B users expect.
    """
    if requested != "auto":
        return requested
    env = os.environ.get("WANDB_MODE", "").strip().lower()  # set but empty: unset
    if env in ("online", "offline", "disabled"):
        return env
    if env == "dryrun":
        return "offline"
    host, port = server()
    if not has_api_key(host):
        return "offline"
    return "online" if reachable(host, port) else "offline"


def server() -> tuple[str, int]:
    """(host, port) of the W&B server this process would talk to (``WANDB_BASE_URL``)."""
    base = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")
    url = urlparse(base)
    return url.hostname or "api.wandb.ai", url.port or (80 if base.startswith("http:") else 443)


def has_api_key(host: str) -> bool:
    """An API key for ``host`` in the environment or in ~/.netrc (where `wandb login` puts it)."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:  # where `wandb login` stores the key
        return netrc.netrc().authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def reachable(host: str, port: int, timeout: float = 2.0) -> bool:
    """The server accepts a TCP connection within ``timeout`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
