"""The reference of every algorithm, written from the specs (``docs/algorithms.md``): its
option, its class, the policy it plays while training, the networks it takes (the one its
defaults were tuned on, those where no settings reached a useful agent), whether it
trains in several processes, and each hyperparameter with its default, its allowed values and
the docstring under its field. Nothing in it is typed by hand, so it cannot drift from the
code (``tests/algos/test_specs.py`` compares the file with ``markdown()``).

    python -m ttt_research.algos.reference > docs/algorithms.md
"""
from __future__ import annotations

import ast
import inspect
import json
from dataclasses import fields

from ttt_research.algos.spec import AlgoSpec, specs

HEADER = """# Algorithms

Written by `python -m ttt_research.algos.reference` from each algorithm's spec
(`src/ttt_research/algos/NAME_spec.py`): do not edit by hand. A default is set on the command
line as `algo.KEY=VALUE`; `population.vary.algo.KEY` / `population.sample.algo.KEY` take the
keys marked *member* ([populations.md](populations.md)). Each value is checked before torch
loads: a value outside its range is refused in one line naming the key and the range.
"""


def field_docs(hyper: type) -> dict[str, str]:
    """The docstring under each field of the dataclass ``hyper``, read from its source (Python
    keeps no attribute docstrings at run time)."""
    tree = ast.parse(inspect.getsource(hyper))
    body = tree.body[0].body
    docs = {}
    for field_node, after in zip(body, body[1:], strict=False):
        if (isinstance(field_node, ast.AnnAssign) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            docs[field_node.target.id] = " ".join(after.value.value.split())
    return docs


def _value(v) -> str:
    """A default as it is written on the command line (YAML's spelling)."""
    return "null" if v is None else json.dumps(v)


def _no_cell(spec: AlgoSpec) -> str:
    """The nets where no settings tried reached a useful agent, each linked to the page that
    shows it (a path from the checkout's top, as a run prints it; this page is in docs/)."""
    if not spec.no_cell:
        return ""
    nets = ", ".join(f"[`net={net}`](../{page})" for net, page in spec.no_cell.items())
    return f"; no useful agent found on {nets} (a run there says so)"


def section(spec: AlgoSpec) -> str:
    """One algorithm's part of the reference."""
    docs = field_docs(spec.hyper)
    several = f"no ({spec.one_process})" if spec.one_process else "yes (`trainer=ddp`)"
    lines = [f"## `algo={spec.name}`", "",
             f"- class: `{spec.target}`",
             f"- plays while training: {spec.acting}",
             f"- networks: {', '.join(spec.nets)}{f' ({spec.net_why})' if spec.net_why else ''}; "
             f"its defaults tuned on `net={spec.tuned_on}`{_no_cell(spec)}",
             f"- several processes: {several}", "",
             "| key | default | allowed | member | what |", "|---|---|---|---|---|"]
    for f in fields(spec.hyper):
        if f.name == "_target_":
            continue
        rule = spec.rule(f.name)
        allowed = (rule.allowed + (", or null" if rule.null and "null" not in rule.allowed else "")
                   if rule is not None else "")
        member = "yes" if f.name in spec.varies else ""
        what = docs.get(f.name, "").replace("|", "\\|")
        lines.append(f"| `{f.name}` | `{_value(f.default)}` | {allowed} | {member} | {what} |")
    return "\n".join(lines) + "\n"


def markdown() -> str:
    """The whole reference: the header, then one section per algorithm, by option name."""
    shipped = sorted((s for s in specs().values() if s.hyper is not None), key=lambda s: s.name)
    return "\n".join([HEADER, *(section(s) for s in shipped)])


if __name__ == "__main__":
    print(markdown(), end="")
