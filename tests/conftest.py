import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

# Tests never upload: a developer's W&B key must not turn test runs (logger=wandb) into
# online runs of their account. Tests of the automatic mode clear this themselves.
import os  # noqa: E402

os.environ.setdefault("WANDB_MODE", "offline")
