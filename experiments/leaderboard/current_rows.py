"""Write a row's current report into the leaderboard's ``report.md`` and ``report.csv``.

The leaderboard's report was made by ``python -m ttt_research.report`` over four run folders
that are not in the repository (only their members' files are: ``NAME/population.json``...).
When a row is measured again, its own report (the same command over its new folder, the same
seeds) replaces the row here, column by column by header name (a column the row's report
lacks, such as X's figures for a row trained as O, stays empty), so that the report says
what the members' files say (``tests/test_cells.py`` checks that it does).

    python experiments/leaderboard/current_rows.py \
        reinforce experiments/reinforce_default/default_seeds_5000_5099

The figures (``report*.png``) are not redrawn: they need the run folders.
"""
from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
NOTE = "Rows written in from their own report (current_rows.py): "


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def row_line(values: list[str]) -> str:
    return "| " + " | ".join(values) + " |"


def tables(lines: list[str]) -> list[tuple[int, list[str]]]:
    """(index of the header line, its cells) for each table of a markdown file."""
    return [(i, cells(line)) for i, line in enumerate(lines)
            if line.startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|---")]


def splice_md(board: list[str], own: list[str], name: str) -> list[str]:
    """Replace ``name``'s first row in each of the board's tables by the row of the matching
    table of ``own`` (its first row, the columns matched by header)."""
    out = list(board)
    for (bi, bhead), (oi, ohead) in zip(tables(board), tables(own), strict=True):
        src = dict(zip(ohead, cells(own[oi + 2]), strict=True))
        for j in range(bi + 2, len(out) + 1):
            if j == len(out) or not out[j].startswith("|"):
                raise SystemExit(f"error: no row {name!r} in the table at line {bi + 1}")
            if cells(out[j])[0] == name:
                out[j] = row_line([name] + [src.get(h, "") for h in bhead[1:]])
                break
    return out


def splice_csv(board: str, own: str, name: str) -> str:
    rows = list(csv.DictReader(io.StringIO(board)))
    fields = list(rows[0])
    mine = next(csv.DictReader(io.StringIO(own)))
    if name not in {r["configuration"] for r in rows}:
        raise SystemExit(f"error: no row {name!r} in report.csv")
    for r in rows:
        if r["configuration"] == name:
            r.update({k: mine.get(k, "") for k in fields if k != "configuration"})
    f = io.StringIO(newline="")
    w = csv.DictWriter(f, fieldnames=fields, lineterminator="\r\n" if "\r\n" in board else "\n")
    w.writeheader()
    w.writerows(rows)
    return f.getvalue()


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit("usage: current_rows.py NAME REPORT_FOLDER")
    name, folder = sys.argv[1], Path(sys.argv[2])
    md = HERE / "report.md"
    board = md.read_text().splitlines()
    new = splice_md(board, (folder / "report.md").read_text().splitlines(), name)
    where = f"{name} from {folder.resolve().relative_to(HERE.parents[1])}/report.md"
    noted = [i for i, line in enumerate(new) if line.startswith(NOTE)]
    if noted:
        if where not in new[noted[0]]:
            new[noted[0]] = f"{new[noted[0]]}; {where}"
    else:  # a paragraph of its own, under the report's first line
        new[1:1] = ["", f"{NOTE}{where}"]
    md.write_text("\n".join(new) + "\n")
    path = HERE / "report.csv"
    board_csv, own_csv = path.read_bytes().decode(), (folder / "report.csv").read_text()
    path.write_bytes(splice_csv(board_csv, own_csv, name).encode())  # its line endings kept
    print(f"wrote the {name} row of {md} and {path}")


if __name__ == "__main__":
    main()
