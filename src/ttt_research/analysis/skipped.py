"""The run folders a report leaves out, and how it says so: one line each on stderr for the
malformed ones and the ones whose figures their policy contradicts (``recheck.py``), one for
the incomplete ones (still running, or stopped before the end), one per run that has copies
(``copies.py``: counted once), and the same in report.md. ``scan.scan_runs`` finds them."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

# Why a run is left out, and how report.md and stderr count each kind.
KINDS = {"incomplete": "incomplete (no eval.json)", "malformed": "malformed",
         "contradicted": "contradicted by its policy.onnx",
         "copy": "duplicate(s) of another run (counted once)"}
SHOWN_COPIES = 3  # the copies named in a run's one line (1,500 copies: three and the count)
SHOWN_RUNS = 5    # the runs with copies given a line on stderr (the rest: one line, and report.md)


@dataclass
class Skipped:
    """A run folder (or a population member: ``name`` says which) left out of the report,
    and why: ``kind`` is one of ``KINDS``; a copy names the run it repeats (``original``)."""
    path: Path
    why: str
    kind: str = "malformed"
    name: str = ""
    original: str = ""

    @property
    def incomplete(self) -> bool:
        return self.kind == "incomplete"


def counts(skipped: list[Skipped]) -> str:
    """``2 incomplete (no eval.json), 1 malformed``."""
    found = [(sum(s.kind == k for s in skipped), words) for k, words in KINDS.items()]
    return ", ".join(f"{n:,} {words}" for n, words in found if n)


def _copies(skipped: list[Skipped]) -> dict[str, list[str]]:
    """{the run kept: the copies left out}, in the order found."""
    found: dict[str, list[str]] = {}
    for s in skipped:
        if s.kind == "copy":
            found.setdefault(s.original, []).append(s.name)
    return found


def copies_line(original: str, copies: list[str]) -> str:
    """One run and its copies in a line of bounded length, whatever their number."""
    shown = ", ".join(copies[:SHOWN_COPIES]) + (f" and {len(copies) - SHOWN_COPIES:,} more"
                                                if len(copies) > SHOWN_COPIES else "")
    return (f"{len(copies) + 1:,} run folders hold one run (the same seed and config): counted once, "
            f"as {original}; the copies: {shown}")


def warn_skipped(skipped: list[Skipped], root: Path) -> None:
    """One line per malformed run (the file and the field), one for the incomplete ones, and
    the count, on stderr."""
    if not skipped:
        return
    for s in skipped:
        if s.kind in ("malformed", "contradicted"):
            print(f"warning: skipped {s.path}: {s.why}", file=sys.stderr)
    copied = list(_copies(skipped).items())
    for original, copies in copied[:SHOWN_RUNS]:
        print(f"warning: {copies_line(original, copies)}", file=sys.stderr)
    if len(copied) > SHOWN_RUNS:
        print(f"warning: {len(copied) - SHOWN_RUNS:,} more runs have copies, each counted once "
              "(report.md lists them)", file=sys.stderr)
    waiting = [s.path for s in skipped if s.incomplete]
    if waiting:
        shown = ", ".join(str(p.relative_to(root)) if p != root else "." for p in waiting[:5])
        print(f"warning: skipped {len(waiting)} incomplete run folder(s) (no eval.json: still running, "
              f"or stopped before the end; resume=true finishes one): {shown}"
              + (", ..." if len(waiting) > 5 else ""), file=sys.stderr)
    print(f"warning: report skipped {len(skipped):,} run folder(s): {counts(skipped)}",
          file=sys.stderr)


def skipped_markdown(skipped: list[Skipped], root: Path) -> str:
    """report.md's line on the folders left out (and, for up to 20, which and why)."""
    if not skipped:
        return ""
    lines = [f"\nSkipped {len(skipped):,} run folder(s): {counts(skipped)}. A run counts once its "
             "eval.json (the last file it writes) is there, every file reads as training writes it, "
             "its figures are what its policy.onnx scores, and it is no copy of another.\n"]
    listed = [s for s in skipped if s.kind != "copy"]
    for s in listed[:20]:
        lines.append(f"- `{s.name or (s.path.relative_to(root) if s.path != root else '.')}`: {s.why}")
    if len(listed) > 20:
        lines.append(f"- ... and {len(listed) - 20} more (all on stderr)")
    copied = list(_copies(skipped).items())
    lines += [f"- {copies_line(original, copies)}" for original, copies in copied[:20]]
    if len(copied) > 20:
        lines.append(f"- ... and {len(copied) - 20} more runs with copies")
    return "\n".join(lines) + "\n"
