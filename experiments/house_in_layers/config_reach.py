"""Where the raw Hydra config reaches: each module of the package that imports omegaconf, and
its functions that take a ``DictConfig`` (a parameter annotated so), grouped by layer (the
package's first folder). Read from the source with ``ast``; nothing is imported or run.

    python experiments/house_in_layers/config_reach.py [SRC]     # SRC: default src/ttt_research

Issue 47 asks that the raw config stop at the entry point (``train/``, the commands) and that
the layers below get typed pieces: this prints how far it still goes down.
"""
from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path


def takes_config(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    return any(a.annotation is not None and "DictConfig" in ast.unparse(a.annotation) for a in args)


def reach(src: Path) -> dict[str, list[tuple[str, list[str]]]]:
    """{layer: [(module, [functions taking a DictConfig])]} for the modules importing omegaconf."""
    out: dict[str, list[tuple[str, list[str]]]] = defaultdict(list)
    for path in sorted(src.rglob("*.py")):
        tree = ast.parse(path.read_text())
        imports = any(isinstance(n, ast.ImportFrom) and (n.module or "").startswith("omegaconf")
                      or isinstance(n, ast.Import) and any(a.name.startswith("omegaconf") for a in n.names)
                      for n in ast.walk(tree))
        if not imports:
            continue
        names = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                names += [f"{node.name}.{f.name}" for f in node.body
                          if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and takes_config(f)]
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and takes_config(node):
                if not any(node in getattr(c, "body", []) for c in ast.walk(tree) if isinstance(c, ast.ClassDef)):
                    names.append(node.name)
        rel = path.relative_to(src)
        layer = rel.parts[0] if len(rel.parts) > 1 else "(top)"
        out[layer].append((str(rel), sorted(names)))
    return out


def main() -> None:
    src = Path(sys.argv[1] if len(sys.argv) > 1 else "src/ttt_research")
    found = reach(src)
    modules = sum(len(v) for v in found.values())
    functions = sum(len(f) for v in found.values() for _, f in v)
    print(f"{modules} modules import omegaconf; {functions} functions take a DictConfig")
    for layer in sorted(found):
        mods = found[layer]
        print(f"\n{layer}: {len(mods)} modules, {sum(len(f) for _, f in mods)} functions")
        for rel, names in mods:
            print(f"  {rel}: {', '.join(names) or '-'}")


if __name__ == "__main__":
    main()
