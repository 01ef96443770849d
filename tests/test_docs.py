"""What the docs claim, checked against what the code does: the defaults and config groups of
docs/configuration.md, its sample lines, the refusal docs/contracts.md describes, the example
of docs/tournament.md. Issue 43 found each of these out of date; a figure typed by hand drifts,
so these are compared with what the code prints or composes now."""

import dataclasses
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from ttt_research import tournament
from ttt_research.algos.spec import AlgoSpec
from ttt_research.train.confdir import compose
from ttt_research.train.console import opening_line

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def code_blocks(path: Path) -> list[list[str]]:
    """The fenced code blocks of a markdown file, each as its lines."""
    return [block.strip("\n").splitlines()
            for block in re.findall(r"^```[a-z]*\n(.*?)^```", path.read_text(), re.M | re.S)]


def block_with(path: Path, text: str) -> list[str]:
    (found,) = [b for b in code_blocks(path) if any(text in line for line in b)]
    return found


def train(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ttt_research", *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO)


def test_configuration_names_the_defaults_training_uses():
    line = next(s for s in block_with(DOCS / "configuration.md", "# defaults:") if "# defaults:" in s)
    said = dict(pair.split("=") for pair in line.split("# defaults:")[1].split())
    choices = compose([], hydra=True).hydra.runtime.choices
    assert said == {group: choices[group] for group in said}


def test_the_group_table_lists_every_option_of_each_group():
    text = (DOCS / "configuration.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| (.*?) \|", text.split("## Config groups")[1], re.M))
    for group in ("algo", "net", "reward", "opponent", "seat", "trainer", "logger", "hparams_search"):
        listed = set(re.findall(r"`(\w+)`", rows[group]))
        assert listed == {p.stem for p in (REPO / "conf" / group).glob("*.yaml")}, group
    presets = {str(p.relative_to(REPO / "conf/experiment").with_suffix(""))
               for p in (REPO / "conf/experiment").rglob("*.yaml")}
    assert presets <= set(re.findall(r"`([\w/]+)`", rows["experiment"]))


def test_the_off_terminal_example_opens_as_the_default_run_does():
    first = block_with(DOCS / "configuration.md", "rounded up to whole updates")[0]
    cfg = compose([])
    per_update = cfg.algo.games_per_update
    updates = math.ceil(cfg.budget.games / per_update)
    what = f"{cfg.algo._target_.rsplit('.', 1)[1].lower()} {list(cfg.net.hidden)} {cfg.net.encoding}, " \
           f"seat {cfg.seat.side} vs random, seed {cfg.seed}"
    assert first == opening_line(what, cfg.budget.games, updates, per_update)
    second = block_with(DOCS / "configuration.md", "rounded up to whole updates")[1]
    assert second.startswith(f"[ 25/{updates}]") and f" {25 * per_update:,} games " in second


@pytest.mark.parametrize("override", ["net=mlp999", "budget.game=5"])
def test_the_sample_refusals_are_what_training_prints(override):
    start = f"error: {override.split('=')[0]}"
    said = [s for s in block_with(DOCS / "configuration.md", "error: net=mlp999") if s.startswith(start)]
    got = train(override)
    assert (got.returncode, got.stdout, got.stderr.splitlines()) == (2, "", said)


def test_the_guide_to_adding_an_algorithm_lists_every_step_and_every_field_of_a_spec():
    """docs/extending.md promised three files, and two tests then failed until two docs followed
    (issue 58): its steps name those tests (each exists) and what makes each pass, and it says
    which of a spec's fields are required, exactly those without a default, naming the others."""
    text = (DOCS / "extending.md").read_text().split("## Every step")[1].split("\n## ")[0]
    named = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", text)
    assert {test for _, test in named} >= {"test_the_algorithms_reference_is_written_from_the_specs",
                                           "test_the_group_table_lists_every_option_of_each_group"}
    for path, test in named:
        assert f"def {test}(" in (REPO / path).read_text(), test
    assert "python -m ttt_research.algos.reference > docs/algorithms.md" in text
    assert "`algo`\n   row" in text or "`algo` row" in text  # this page's group table, the row to extend
    spec = {f.name: f for f in dataclasses.fields(AlgoSpec)}
    required = {name for name, f in spec.items()
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    said = re.search(r"\*\*(`\w+`(?: and `\w+`)*) are required\*\*", text).group(1)
    assert set(re.findall(r"`(\w+)`", said)) == required
    for name in set(spec) - required - {"target"}:  # target: hyper's _target_
        assert f"`{name}`" in text, f"docs/extending.md does not say what AlgoSpec.{name} is"
    for name in ("acting", "population"):  # the question: neither is required
        assert f"**`{name}` is not required**" in text and name not in required


def test_contracts_gives_the_exit_code_of_a_refused_option():
    said = re.search(r"`algo=ppoo`[^.]*?exit\s+code\s+(\d+)", (DOCS / "contracts.md").read_text()).group(1)
    got = train("algo=ppoo")
    assert int(said) == got.returncode == 2 and len(got.stderr.splitlines()) == 1


def test_the_tournament_example_is_what_the_command_prints(capsys):
    block = block_with(DOCS / "tournament.md", "$ python -m ttt_research.tournament random rules perfect")
    assert tournament.main(["random", "rules", "perfect"]) == 0
    printed = capsys.readouterr().out.splitlines()
    timed = "exact cross-play"  # the last line: seconds, which vary
    assert [s for s in printed if timed not in s] == [s for s in block[1:] if timed not in s]
    # The prose under it quotes the matrix: perfect as X against rules as O, and the reverse.
    order = ["perfect", "rules", "random"]  # by rank
    matrix = {line.split()[1]: line.split()[2:] for line in printed
              if re.match(r"\s*\d+\s+\w+\s+[+-]\d", line)}
    example = (DOCS / "tournament.md").read_text().split(block[0])[1]
    prose = example.split("```")[1].split("\n#")[0]
    for x, o in (("perfect", "rules"), ("rules", "perfect")):
        assert f"({matrix[x][order.index(o)]})" in prose, (x, o)


# The README is what a new user reads first: what it is, the quick start, the commands, one
# compact results table and links. Held to this many lines; the rest lives in docs/.
README_LINES = 200
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)  # no headings in code
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


def test_the_readme_stays_short_and_its_quick_start_is_two_commands():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= README_LINES
    quick = text.split("## Quick start")[1].split("```")[1].strip().splitlines()[1:]  # after "bash"
    assert len(quick) == 2


def readme_test_command() -> str:
    """The quick start's test line, without its comment."""
    quick = (REPO / "README.md").read_text().split("## Quick start")[1].split("```")[1]
    (line,) = [s for s in quick.splitlines() if "pytest" in s]
    return line.split("#")[0].strip()


def test_ci_runs_exactly_the_readmes_test_command():
    command = readme_test_command()
    ci = [s.strip() for s in (REPO / ".ci/run").read_text().splitlines() if s.strip()]
    assert ci[-1] == command



def test_the_test_command_runs_every_test_once_the_alone_ones_apart():
    # pytest -n auto -m "not alone" ... && pytest -m alone: the two selections are complements, so
    # no test is dropped or run twice; the marker is declared (pytest refuses nothing it does not know).
    parts = [p.split("pytest", 1)[1].strip() for p in readme_test_command().split("&&") if "pytest" in p]
    assert len(parts) == 2
    assert parts[0].startswith('-n auto -m "not alone"') and "--durations=15" in parts[0]
    assert parts[1] == "-m alone -rs"
    # -rs in both: a test skipped for a missing tool says why in the summary (README: "its reason").
    assert all("-rs" in p.split() for p in parts)
    assert any(m.startswith("alone:") for m in tomllib.loads((REPO / "pyproject.toml").read_text())
               ["tool"]["pytest"]["ini_options"]["markers"])

MARKDOWN = [REPO / "README.md", *sorted(DOCS.rglob("*.md")), REPO / "experiments/README.md"]


@pytest.mark.parametrize("page", MARKDOWN, ids=[str(p.relative_to(REPO)) for p in MARKDOWN])
def test_every_link_of_the_readme_and_docs_leads_somewhere(page):
    """Each relative link names a file of the checkout, and its #anchor a heading there; none
    points outside the checkout (a user has no ../shared folder)."""
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if REPO not in dest.parents and dest != REPO:
            broken.append(f"{target}: outside the checkout")
        elif not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no such heading")
    assert broken == []
