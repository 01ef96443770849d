"""The run folders a report leaves out, and how it says so: one line each on stderr for the
malformed ones, one for the incomplete ones (still running, or stopped before the end), and
the same in report.md. ``runs.scan_runs`` finds them."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Skipped:
    """A run folder left out of the report, and why (``incomplete``: no eval.json yet)."""
    path: Path
    why: str
    incomplete: bool = False


def counts(skipped: list[Skipped]) -> str:
    """``2 incomplete (no eval.json), 1 malformed``."""
    n_inc = sum(s.incomplete for s in skipped)
    parts = [f"{n_inc} incomplete (no eval.json)" if n_inc else "",
             f"{len(skipped) - n_inc} malformed" if len(skipped) > n_inc else ""]
    return ", ".join(p for p in parts if p)


def warn_skipped(skipped: list[Skipped], root: Path) -> None:
    """One line per malformed run (the file and the field), one for the incomplete ones, and
    the count, on stderr."""
    if not skipped:
        return
    for s in skipped:
        if not s.incomplete:
            print(f"warning: skipped {s.path}: {s.why}", file=sys.stderr)
    waiting = [s.path for s in skipped if s.incomplete]
    if waiting:
        shown = ", ".join(str(p.relative_to(root)) if p != root else "." for p in waiting[:5])
        print(f"warning: skipped {len(waiting)} incomplete run folder(s) (no eval.json: still running, "
              f"or stopped before the end; resume=true finishes one): {shown}"
              + (", ..." if len(waiting) > 5 else ""), file=sys.stderr)
    print(f"warning: report skipped {len(skipped)} run folder(s): {counts(skipped)}",
          file=sys.stderr)


def skipped_markdown(skipped: list[Skipped], root: Path) -> str:
    """report.md's line on the folders left out (and, for up to 20, which and why)."""
    if not skipped:
        return ""
    lines = [f"\nSkipped {len(skipped)} run folder(s): {counts(skipped)}. A run counts once its "
             "eval.json (the last file it writes) is there and every file reads as training writes it.\n"]
    for s in skipped[:20]:
        lines.append(f"- `{s.path.relative_to(root) if s.path != root else '.'}`: {s.why}")
    if len(skipped) > 20:
        lines.append(f"- ... and {len(skipped) - 20} more (all on stderr)")
    return "\n".join(lines) + "\n"
