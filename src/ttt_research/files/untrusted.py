"""Reading the files of a run folder one did not write: nothing resolved, everything checked.

``report`` and ``dashboard`` read folders that may come from anywhere (a colleague's sweep, a
download, a run killed half-way). Here the files are read as data and nothing more:

- YAML (``.hydra/*.yaml``, ``multirun.yaml``) is read by ``yaml.safe_load``, not OmegaConf:
  an interpolation such as ``${oc.env:MY_SECRET_TOKEN}`` stays the text it is, so no
  environment variable, file or resolver is ever consulted, and no value of one can reach a
  report;
- JSON is parsed as JSON (NaN and Infinity parse, and are then refused by the checks);
- only regular files of at most ``MAX_BYTES`` (or a smaller limit given to ``read_bytes``) are
  read (a FIFO named ``eval.json`` would block forever, ``/dev/zero`` behind a link would never end);
- an ``eval.json`` report is checked field by field (``check_report``): rates finite and in
  [0, 1] and summing to 1, both seats, a worst case that is ``win``, ``draw`` or ``loss``.

Every problem is a ``Malformed`` error whose message names the file and the field (``eval.json:
as_o.vs_random.win is nan, not a rate in [0, 1]``). Of a value it says the type (``a string``,
``an interpolation``) or, for a number, the number; never a file's text (YAML's and JSON's
parsers say where the syntax breaks).

Standard library and PyYAML only.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ttt_research.contract import EVAL_SEATS, OUTCOMES, REPORT_KEY, WORST_VALUE

MAX_BYTES = 64 * 2**20  # larger than any population.json of 4,096 members; a bigger file is not ours
SUM_TOLERANCE = 1e-6     # eval.json rounds each rate to 12 digits: win + loss + tie is 1 within 1e-11


class Malformed(ValueError):
    """A file of a run folder that cannot be what training writes; the message names the
    file and the field."""


def read_bytes(path: Path, name: str | None = None, limit: int = MAX_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (``MAX_BYTES``; smaller for a
    kind of file whose real size is known, such as a policy table). At most ``limit + 1``
    bytes are ever read, so neither a huge file nor ``/dev/zero`` costs more than that."""
    name = name or path.name
    if not path.is_file():  # follows a link: what matters is what would be read
        raise Malformed(f"{name}: not a regular file")
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise Malformed(f"{name}: cannot be read ({e.strerror or type(e).__name__})") from e
    if len(data) > limit:
        raise Malformed(f"{name}: larger than {limit / 2**20:g} MiB")
    return data


def read_text(path: Path, name: str | None = None) -> str:
    """The UTF-8 text of a regular file of at most ``MAX_BYTES``."""
    name = name or path.name
    data = read_bytes(path, name)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Malformed(f"{name}: not UTF-8 text (byte {e.start})") from e


def load_json(path: Path, name: str | None = None) -> Any:
    name = name or path.name
    text = read_text(path, name)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise Malformed(f"{name}: not JSON ({e.msg} at line {e.lineno} column {e.colno})") from e
    except RecursionError as e:  # thousands of nested brackets
        raise Malformed(f"{name}: not JSON (nested too deep)") from e


def load_yaml(path: Path, name: str | None = None) -> Any:
    """Plain YAML data: mappings, lists, strings, numbers. Interpolations stay text."""
    import yaml

    name = name or path.name
    text = read_text(path, name)
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        where = f" at line {e.problem_mark.line + 1}" if e.problem_mark else ""
        raise Malformed(f"{name}: not YAML ({e.problem or 'a syntax error'}{where})") from e
    except (yaml.YAMLError, RecursionError) as e:
        raise Malformed(f"{name}: not YAML ({type(e).__name__})") from e


def kind(value: Any) -> str:
    """What a value is, in words, without quoting it (an interpolation is named as such)."""
    if isinstance(value, str) and "${" in value:
        return "an interpolation (report resolves none)"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # nan, inf: these are the problem and say nothing of the file
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", dict: "a mapping",
            list: "a list", type(None): "empty"}.get(type(value), f"a {type(value).__name__}")


def select(data: Any, dotted: str, default: Any = None) -> Any:
    """``data["a"]["b"]`` for ``"a.b"``, or ``default`` where a level is missing."""
    for part in dotted.split("."):
        if not isinstance(data, dict) or part not in data:
            return default
        data = data[part]
    return data


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def rate(value: Any, where: str) -> float:
    """``value`` as a rate: a finite number in [0, 1]."""
    if not is_number(value) or not math.isfinite(value) or not 0.0 <= value <= 1.0:
        shown = value if is_number(value) and math.isfinite(value) else kind(value)
        raise Malformed(f"{where} is {shown}, not a rate in [0, 1]")
    return float(value)


def integer(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        shown = value if is_number(value) and math.isfinite(value) else kind(value)
        raise Malformed(f"{where} is {shown}, not an integer")
    return value


def mapping(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise Malformed(f"{where} is {kind(value)}, not a mapping")
    return value


def check_report(report: Any, where: str = "eval.json") -> dict:
    """``report`` if it is an ``eval.json`` report the project could have written (extra keys
    such as a population's block are allowed), else ``Malformed`` naming the field."""
    mapping(report, where)
    for seat in EVAL_SEATS:
        key = REPORT_KEY[seat]
        if key not in report:
            raise Malformed(f"{where}: {key} is missing (a report has both seats)")
        side = mapping(report[key], f"{where}: {key}")
        for opponent in ("vs_random", "vs_perfect"):
            block = mapping(side.get(opponent), f"{where}: {key}.{opponent}")
            values = [rate(block.get(o), f"{where}: {key}.{opponent}.{o}") for o in OUTCOMES]
            if abs(sum(values) - 1.0) > SUM_TOLERANCE:
                raise Malformed(f"{where}: {key}.{opponent}: win + loss + tie is {sum(values):.6g}, not 1")
        worst = side.get("worst_case")
        if not isinstance(worst, str) or worst not in WORST_VALUE:
            shown = f"{worst!r}" if is_number(worst) and math.isfinite(worst) else kind(worst)
            raise Malformed(f"{where}: {key}.worst_case is {shown}, not one of {', '.join(WORST_VALUE)}")
    rate(report.get("optimal_move_rate"), f"{where}: optimal_move_rate")
    return report
