#!/usr/bin/env python3
"""Diff two snapshots made by snapshot.py, file by file.

    python experiments/house_in_layers/compare.py OUT_A OUT_B

Compares the files each snapshot's manifest.txt lists (the captured ones: cfg/*, runs/*/
eval.json, metrics.csv, population.*, policy.onnx.sha256, status.txt, and index.txt); the raw
run folders' other files and logs/ hold timings and are not compared. One line per file
(same / DIFFERENT + the first differing line / only in A|B), then a summary; exit 1 on any
difference, 2 on a bad argument.
"""

from __future__ import annotations

import sys
from pathlib import Path


def manifest(root: Path) -> list[str]:
    m = root / "manifest.txt"
    if not m.is_file():
        sys.exit(f"{root}: no manifest.txt (not a finished snapshot.py output)")
    return [l for l in m.read_text().splitlines() if l] + ["manifest.txt"]


def first_difference(a: str, b: str) -> str:
    la, lb = a.splitlines(), b.splitlines()
    for n, (x, y) in enumerate(zip(la, lb, strict=False), 1):
        if x != y:
            return f"line {n}: A={x[:200]!r} B={y[:200]!r}"
    if len(la) != len(lb):
        n = min(len(la), len(lb)) + 1
        extra = (la if len(la) > len(lb) else lb)[n - 1]
        return f"line {n}: only in {'A' if len(la) > len(lb) else 'B'}: {extra[:200]!r}"
    return "whitespace / line endings differ"


def main() -> None:
    if len(sys.argv) != 3:
        print("usage: python compare.py OUT_A OUT_B", file=sys.stderr)
        sys.exit(2)
    a, b = Path(sys.argv[1]), Path(sys.argv[2])
    files = sorted(set(manifest(a)) | set(manifest(b)))
    counts = {"same": 0, "DIFFERENT": 0, "only in A": 0, "only in B": 0}
    for rel in files:
        fa, fb = a / rel, b / rel
        if not fb.is_file():
            counts["only in A"] += 1
            print(f"only in A  {rel}")
            continue
        if not fa.is_file():
            counts["only in B"] += 1
            print(f"only in B  {rel}")
            continue
        da, db = fa.read_bytes(), fb.read_bytes()
        if da == db:
            counts["same"] += 1
            print(f"same       {rel}")
        else:
            counts["DIFFERENT"] += 1
            print(f"DIFFERENT  {rel}: "
                  f"{first_difference(da.decode(errors='replace'), db.decode(errors='replace'))}")
    differ = counts["DIFFERENT"] + counts["only in A"] + counts["only in B"]
    print(f"summary: {len(files)} files: {counts['same']} same, {counts['DIFFERENT']} different, "
          f"{counts['only in A']} only in A, {counts['only in B']} only in B"
          + ("" if differ else "  -> IDENTICAL"))
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
