"""The time to a safe agent (``bench --compare antirez``): the seeded, dumping copy of antirez's
ttt-rl (``baselines/antirez.py``), its network loaded into ours with a parity check, and the
seed-by-seed comparison of ``bench/safe.py``.

The C source is antirez's and never in the repo: ``$TTT_ANTIREZ_SRC``, or the copy beside the
checkout; tests that compile it skip without it or without a C compiler."""

import os
import shutil
import struct
from pathlib import Path

import pytest
import torch

from tests.helpers.bench_stubs import stub_figures
from ttt_research.baselines import antirez
from ttt_research.bench import format_table, main, safe
from ttt_research.env import game
from ttt_research.errors import UserError
from ttt_research.evaluation.exact import decision_codes, greedy_actions
from ttt_research.models.nets import MLP

ANTIREZ_SRC = Path(os.environ.get("TTT_ANTIREZ_SRC") or
                   Path(__file__).resolve().parents[2].parent / "shared/reference/antirez-ttt-rl/ttt.c")
CC = os.environ.get("CC") or next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
needs_c = pytest.mark.skipif(not ANTIREZ_SRC.is_file() or CC is None,
                             reason="needs antirez's ttt.c beside the checkout and a C compiler")
GAMES = 2_000  # a few milliseconds of C training: enough to move every weight


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Path:
    """The patched program, compiled once for the module (about a second)."""
    if not ANTIREZ_SRC.is_file() or CC is None:
        pytest.skip("needs antirez's ttt.c and a C compiler")
    return antirez.build_seeded(ANTIREZ_SRC, tmp_path_factory.mktemp("seeded"))


@pytest.fixture(scope="module")
def dump(seeded, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dump") / "seed1.bin"
    antirez.run_seeded(seeded, GAMES, 1, out)
    return out


def write_dump(net: MLP, path: Path) -> None:
    """A dump as the patched C would write it for ``net`` (one hidden layer, planes18): its
    weights in C's layout (``to_network``'s inverse), its logits and greedy moves as O."""
    first, last = net.body[0], net.body[-1]
    swap = torch.arange(18).view(9, 2).flip(-1).flatten()
    t = game.tables()
    codes = decision_codes()
    codes = codes[t.mover[codes] == game.O]  # (2097,) O to move, in code order
    with torch.no_grad():
        logits = net.raw_logits(t.view[codes])  # (2097, 9)
    moves = greedy_actions(net)[0][codes]
    data = bytearray(struct.pack("=8si", b"TTTRLNN1", len(codes)))
    for w in (first.weight.T[swap], last.weight.T, first.bias, last.bias):  # (18, H), (H, 9), (H,), (9,)
        data += struct.pack(f"={w.numel()}f", *w.detach().flatten().tolist())
    for code, row, move in zip(codes.tolist(), logits.tolist(), moves.tolist(), strict=True):
        data += struct.pack("=i9fi", code, *row, move)
    path.write_bytes(bytes(data))


# --------------------------------------------------------------------------- the patch


@needs_c
def test_same_seed_gives_the_same_dump_and_another_seed_another(seeded, dump, tmp_path):
    again, other = tmp_path / "again.bin", tmp_path / "other.bin"
    assert antirez.run_seeded(seeded, GAMES, 1, again) > 0
    antirez.run_seeded(seeded, GAMES, 2, other)
    assert again.read_bytes() == dump.read_bytes()  # srand(SEED): the clock no longer enters
    assert other.read_bytes() != dump.read_bytes()
    # Header, 2,809 floats of weights, 2,097 records of (code, 9 logits, move): 103,516 bytes.
    assert dump.stat().st_size == 12 + 4 * (1800 + 900 + 100 + 9) + 44 * antirez.O_POSITIONS == 103_516


def test_a_source_without_the_anchors_is_refused_in_one_line(tmp_path):
    with pytest.raises(antirez.AntirezError) as e:
        antirez.patch_source("int main(int argc, char **argv) { return 0; }\n")
    assert str(e.value) == "the source does not look like antirez's ttt-rl: no `srand(time(NULL));` to patch"
    twice = "srand(time(NULL));\nsrand(time(NULL));\n"
    with pytest.raises(antirez.AntirezError, match=r"2 times `srand\(time\(NULL\)\);`"):
        antirez.patch_source(twice)
    src = tmp_path / "hello.c"
    src.write_text("#include <stdio.h>\nint main(void) { srand(time(NULL)); return 0; }\n")
    with pytest.raises(antirez.AntirezError) as e:
        antirez.build_seeded(src, tmp_path)  # refused before any compiler runs
    assert str(e.value) == (f"--antirez-src {src} does not look like antirez's ttt-rl: "
                            "no `int main(int argc, char **argv) {` to patch")
    assert "\n" not in str(e.value) and not (tmp_path / antirez.SEEDED_NAME).exists()


@pytest.mark.skipif(not ANTIREZ_SRC.is_file(), reason="antirez's ttt.c is not beside the checkout")
def test_the_patch_changes_only_the_seed_and_adds_the_dump():
    text = ANTIREZ_SRC.read_text()
    patched = antirez.patch_source(text)
    assert "srand(time(NULL));" not in patched and "strtoul(argv[2], NULL, 10)" in patched
    assert patched.count("if (argc > 3) return ttt_research_dump(&nn, argv[3]);") == 1
    # Everything of the original is still there, in order: the patch only inserts.
    seeded = "srand(argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : (unsigned)time(NULL));"
    rest = iter(patched.replace(seeded, "srand(time(NULL));"))
    assert all(ch in rest for ch in text)


# --------------------------------------------------------------------------- loading and parity


@needs_c
def test_the_loaded_network_gives_the_c_logits_and_is_evaluated_as_o(dump):
    d = antirez.read_dump(dump)
    net = antirez.to_network(d)
    assert isinstance(net, MLP) and net.spec() == {"hidden": [100], "encoding": "planes18"}
    assert antirez.check_parity(net, d) < 1e-4
    ev = antirez.evaluate_dump(dump)
    assert ev["parity_max_abs_diff"] < 1e-4 and ev["greedy_differs"] == 0
    assert ev["o"]["worst_case"] in {"win", "draw", "loss"}
    assert ev["unbeatable_as_o"] == (ev["o"]["worst_case"] != "loss")
    rates = ev["o"]["vs_random"]
    assert sum(rates.values()) == pytest.approx(1.0) and ev["eval_s"] > 0
    # The C program's moves are what is evaluated: each a legal cell where it moved.
    t = game.tables()
    assert bool(t.legal[torch.tensor(d.codes), torch.tensor(d.moves)].all())


@needs_c
def test_a_wrong_layout_fails_the_parity_check(dump, tmp_path):
    d = antirez.read_dump(dump)
    # Without the swap of each cell's two bits (C's X, O against our own, opponent): refused.
    net = MLP(hidden=[100], encoding="planes18")
    with torch.no_grad():
        net.body[0].weight.copy_(torch.tensor(d.arrays["weights_ih"]).view(18, 100).T)
        net.body[0].bias.copy_(torch.tensor(d.arrays["biases_h"]))
        net.body[-1].weight.copy_(torch.tensor(d.arrays["weights_ho"]).view(100, 9).T)
        net.body[-1].bias.copy_(torch.tensor(d.arrays["biases_o"]))
    with pytest.raises(antirez.AntirezError, match="the weight layout is not as expected"):
        antirez.check_parity(net, d)
    # A dump whose output weights were written in the other order: refused in one line.
    data = bytearray(dump.read_bytes())
    at = 12 + 4 * 1800
    ho = struct.unpack_from("=900f", data, at)
    struct.pack_into("=900f", data, at, *[ho[o * 100 + h] for h in range(100) for o in range(9)])
    bad = tmp_path / "transposed.bin"
    bad.write_bytes(bytes(data))
    with pytest.raises(antirez.AntirezError) as e:
        antirez.evaluate_dump(bad)
    assert str(e.value).startswith(f"the network dump {bad}: the project's network, loaded from the C "
                                   "weights, gives logits up to ")
    assert "\n" not in str(e.value)


@needs_c
def test_a_truncated_or_foreign_dump_is_one_line(dump, tmp_path):
    data = dump.read_bytes()
    cases = {"short.bin": data[:-7], "long.bin": data + b"\0" * 44, "empty.bin": b"",
             "foreign.bin": b"PK\x03\x04" + data[4:]}
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(antirez.AntirezError) as e:
            antirez.evaluate_dump(tmp_path / name)
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith(f"the network dump {tmp_path / name} is "), msg
    assert "truncated or malformed: 103,509 bytes for 2,097 positions" in str(
        pytest.raises(antirez.AntirezError, antirez.read_dump, tmp_path / "short.bin").value)
    moved = bytearray(data)
    struct.pack_into("=i", moved, len(data) - 4, 12)  # the last record's move: cell 12
    (tmp_path / "moved.bin").write_bytes(bytes(moved))
    with pytest.raises(antirez.AntirezError, match="codes or moves are out of range"):
        antirez.read_dump(tmp_path / "moved.bin")
    with pytest.raises(antirez.AntirezError, match=r"^cannot read the network dump .*missing\.bin"):
        antirez.read_dump(tmp_path / "missing.bin")


# --------------------------------------------------------------------------- another hidden size


def test_a_dump_of_25_hidden_units_is_read_by_its_length_without_a_compiler(tmp_path):
    torch.manual_seed(0)
    net = MLP(hidden=[25], encoding="planes18").eval()
    path = tmp_path / "h25.bin"
    write_dump(net, path)
    # Header, 28 * 25 + 9 = 709 floats, 2,097 records of 44 bytes.
    assert path.stat().st_size == antirez.dump_size(25) == 12 + 4 * 709 + 44 * 2_097 == 95_116
    assert [antirez.hidden_of(antirez.dump_size(h)) for h in (1, 25, 100, 128)] == [1, 25, 100, 128]
    assert antirez.hidden_of(antirez.dump_size(25) + 4) is None and antirez.hidden_of(0) is None
    d = antirez.read_dump(path)
    assert d.hidden == 25 and len(d.arrays["weights_ih"]) == 450 and len(d.arrays["weights_ho"]) == 225
    loaded = antirez.to_network(d)
    assert loaded.spec() == {"hidden": [25], "encoding": "planes18"}
    pairs = zip(loaded.state_dict().values(), net.state_dict().values(), strict=True)
    assert all(torch.equal(a, b) for a, b in pairs)
    ev = antirez.evaluate_dump(path, hidden=25)
    assert ev["parity_max_abs_diff"] == 0.0 and ev["greedy_differs"] == 0
    assert ev["unbeatable_as_o"] == (ev["o"]["worst_case"] != "loss")
    # Told another width (the bench knows what it built): refused in one line, no guessing.
    with pytest.raises(antirez.AntirezError) as e:
        antirez.read_dump(path, hidden=100)
    assert str(e.value) == (f"the network dump {path} is truncated or malformed: 95,116 bytes for 2,097 "
                            "positions (expected 2,097 positions in 103,516 bytes, 100 hidden units)")
    cut = tmp_path / "cut.bin"
    cut.write_bytes(path.read_bytes()[:-2])  # no width gives that length
    with pytest.raises(antirez.AntirezError, match=r"95,114 bytes .* the length of some hidden size H: "
                                                   r"103,516 bytes at H = 100, 112 more or less a unit\)$"):
        antirez.read_dump(cut)


@pytest.fixture(scope="module")
def seeded25(tmp_path_factory) -> Path:
    """The patched program built with -DNN_HIDDEN_SIZE=25 (about a second)."""
    if not ANTIREZ_SRC.is_file() or CC is None:
        pytest.skip("needs antirez's ttt.c and a C compiler")
    return antirez.build_seeded(ANTIREZ_SRC, tmp_path_factory.mktemp("seeded25"), hidden=25)


@needs_c
def test_the_c_built_with_25_hidden_units_dumps_them_and_is_judged_with_them(seeded25, dump, tmp_path):
    assert seeded25.name == "ttt-seeded-h25"
    out = tmp_path / "h25.bin"
    antirez.run_seeded(seeded25, GAMES, 1, out)
    assert out.stat().st_size == 95_116 and dump.stat().st_size == 103_516  # the flag, not the source's 100
    d = antirez.read_dump(out)
    assert d.hidden == 25 and antirez.read_dump(dump).hidden == 100
    net = antirez.to_network(d)
    assert net.spec() == {"hidden": [25], "encoding": "planes18"}
    assert antirez.check_parity(net, d) < 1e-4
    ev = antirez.evaluate_dump(out, hidden=25)
    assert ev["parity_max_abs_diff"] < 1e-4 and ev["greedy_differs"] == 0
    assert sum(ev["o"]["vs_random"].values()) == pytest.approx(1.0)
    antirez.check_seeded(seeded25, 25)  # the bench's probe passes at its width
    with pytest.raises(antirez.AntirezError, match="100 hidden units"):
        antirez.check_seeded(seeded25, 100)


# --------------------------------------------------------------------------- time to safe


def test_time_to_safe_alternates_sides_per_network_and_summarises(monkeypatch, tmp_path):
    order = []

    def fake_c(binary, games, seed, folder, hidden):
        assert binary.name == f"ttt-{hidden}"  # the C built with the network's own hidden size
        order.append(f"c{hidden}/{seed}")
        return {"seed": seed, "seconds": 2.0 * seed, "unbeatable_as_o": seed != 2, "eval_s": 0.01,
                "o": {"vs_random": {"win": 0.9, "loss": 0.0 if seed != 2 else 0.02, "tie": 0.1}}}

    def fake_ours(seed, folder, net, overrides=()):
        order.append(f"{net}/{seed}")
        assert overrides == ("budget.games=1",)
        return {"seed": seed, "seconds": 1.0, "unbeatable_as_o": True, "config": {"algo": "A"},
                "o": {"vs_random": {"win": 0.9, "loss": 0.0, "tie": 0.1}}}

    monkeypatch.setattr(safe, "run_c", fake_c)
    monkeypatch.setattr(safe, "run_ours", fake_ours)
    said = []
    binaries = {25: tmp_path / "ttt-25", 100: tmp_path / "ttt-100"}
    block = safe.time_to_safe(binaries, 3, 1_000, ("budget.games=1",), log=said.append)
    # Seed by seed, every card network; who goes first alternates; mlp128 (two layers) has no C.
    assert order == ["c25/1", "mlp25/1", "c100/1", "mlp100/1", "mlp128/1",
                     "mlp25/2", "c25/2", "mlp100/2", "c100/2", "mlp128/2",
                     "c25/3", "mlp25/3", "c100/3", "mlp100/3", "mlp128/3"]
    assert len(said) == 15
    assert said[0].startswith("time to safe, seed 1 (1/3), net=mlp25: antirez's C (hidden 25), "
                              "1,000 games: 2.0 s")
    assert block["seeds"] == [1, 2, 3] and list(block["networks"]) == ["mlp25", "mlp100", "mlp128"]
    nets = block["networks"]
    assert [nets[n]["hidden"] for n in nets] == [[25], [100], [128, 128]]  # as the configs compose them
    c, ours = nets["mlp25"]["antirez"], nets["mlp25"]["ours"]
    assert (c["runs"], c["unbeatable"], c["share"], c["hidden"]) == (3, 2, pytest.approx(2 / 3), 25)
    assert c["share_ci95"][0] < 2 / 3 < c["share_ci95"][1]
    assert c["median_seconds"] == 4.0 and c["total_seconds"] == 12.0 and c["seconds_per_safe_agent"] == 6.0
    assert "-DNN_HIDDEN_SIZE=25" in c["command"] and nets["mlp100"]["antirez"]["hidden"] == 100
    assert ours["share"] == 1.0 and ours["share_ci95"][1] == pytest.approx(1.0)
    assert ours["seconds_per_safe_agent"] == 3.0 / 3 and ours["config"] == {"algo": "A"}
    assert "algo=reinforce net=mlp25 seed=SEED" in ours["command"]
    assert "config" not in ours["per_seed"][1] and c["games"] == 1_000
    pair = nets["mlp25"]
    assert pair["ratio_median_seconds"] == 4.0 and pair["ratio_seconds_per_safe_agent"] == 6.0
    alone = nets["mlp128"]
    assert alone["antirez"] is None and alone["ratio_seconds_per_safe_agent"] is None
    assert alone["antirez_note"] == safe.NO_C and alone["ours"]["runs"] == 3
    lines = safe.format_lines(block)
    assert lines[0] == ("time to a safe agent (unbeatable as O: no X strategy beats it), algo=reinforce, "
                        "seeds 1-3, sides alternating:")
    assert lines[1:5] == [
        "  net=mlp25 (hidden [25]):",
        "    antirez's C ttt-rl, NN_HIDDEN_SIZE 25, 1,000 games: 2/3 unbeatable as O (67%, 95% CI 21%-94%); "
        "median 4.0 s per agent; 6.0 s per safe agent",
        "    ours, python -m ttt_research algo=reinforce net=mlp25: 3/3 unbeatable as O (100%, 95% CI "
        "44%-100%); median 1.0 s per agent; 1.0 s per safe agent",
        "    C / ours: median seconds 4.00x, seconds per safe agent 6.00x"]
    assert lines[-3:-1] == ["  net=mlp128 (hidden [128, 128]):",
                            "    antirez's C has one hidden layer only: no such network, ours alone"]
    # No safe agent on a side: no seconds per safe agent, and no ratio of them.
    monkeypatch.setattr(safe, "run_ours", lambda seed, folder, net, overrides=(): {
        **fake_ours(seed, folder, net, overrides), "unbeatable_as_o": False})
    block = safe.time_to_safe({25: tmp_path / "ttt-25"}, 1, 1_000, ("budget.games=1",), nets=("mlp25",))
    pair = block["networks"]["mlp25"]
    assert pair["ours"]["seconds_per_safe_agent"] is None and pair["ratio_seconds_per_safe_agent"] is None
    assert "no safe agent" in safe.format_lines(block)[3]
    assert safe.format_lines(block)[0].endswith("seed 1:")
    with pytest.raises(ValueError, match=r"hidden sizes \[100\]"):  # mlp100 without its C
        safe.time_to_safe({25: tmp_path / "ttt-25"}, 1, 1_000, nets=("mlp100",))


def test_ours_as_one_population_is_timed_once_per_network_beside_the_seed_by_seed_runs(monkeypatch, tmp_path):
    order = []
    c_run = lambda binary, games, seed, folder, hidden: {  # noqa: E731
        "seed": seed, "seconds": 4.0, "unbeatable_as_o": seed == 1, "eval_s": 0.01,
        "o": {"vs_random": {"win": 0.9, "loss": 0.0 if seed == 1 else 0.01, "tie": 0.1}}}

    def fake_population(seeds, folder, net, overrides=()):
        order.append((net, list(seeds), tuple(overrides)))
        return {"seconds": 6.0, "command": f"python -m ttt_research algo=reinforce net={net} seed=1 "
                                          "population.size=2 threads=1",
                "members": [{"seed": s, "unbeatable_as_o": True, "o": {}} for s in seeds]}

    monkeypatch.setattr(safe, "run_c", c_run)
    monkeypatch.setattr(safe, "run_ours", lambda seed, folder, net, overrides=(): {
        "seed": seed, "seconds": 5.0, "unbeatable_as_o": False, "config": {},
        "o": {"vs_random": {"win": 0.8, "loss": 0.02, "tie": 0.18}}})
    monkeypatch.setattr(safe, "run_population", fake_population)
    said = []
    block = safe.time_to_safe({25: tmp_path / "ttt-25"}, 2, 1_000, ("budget.games=1",), nets=("mlp25",),
                              log=said.append, population=True)
    assert order == [("mlp25", [1, 2], ("budget.games=1",))]
    assert said[-1] == "time to safe, net=mlp25: ours as one population of 2 (one thread): 6.0 s, 2/2 unbeatable as O"
    pair = block["networks"]["mlp25"]
    together = pair["ours_population"]
    # the command's 6 s shared by its 2 members, both safe: 3 s each and per safe agent
    assert (together["runs"], together["unbeatable"], together["total_seconds"]) == (2, 2, 6.0)
    assert together["median_seconds"] == 3.0 and together["seconds_per_safe_agent"] == 3.0
    # the C: 8 s for 1 safe agent of 2; ours one by one: none safe
    assert pair["ratio_population_seconds_per_safe_agent"] == pytest.approx(8.0 / 3.0)
    assert pair["ratio_seconds_per_safe_agent"] is None
    lines = safe.format_lines(block)
    assert lines[4] == ("    ours, the same seeds as one population on one thread: 2/2 unbeatable as O (100%, "
                        "95% CI 34%-100%); median 3.0 s per agent; 3.0 s per safe agent")
    assert lines[5].endswith("seconds per safe agent n/a (a side has no safe agent), as one population 2.67x")
    # without it (the default of time_to_safe), no population is run and the block says None
    order.clear()
    block = safe.time_to_safe({25: tmp_path / "ttt-25"}, 2, 1_000, nets=("mlp25",))
    assert order == [] and block["networks"]["mlp25"]["ours_population"] is None


def test_without_singles_only_the_c_runs_seed_by_seed_then_ours_as_one_population(monkeypatch, tmp_path):
    order = []

    def c_run(binary, games, seed, folder, hidden):
        order.append(f"c/{seed}")
        return {"seed": seed, "seconds": 4.0, "unbeatable_as_o": seed == 1, "eval_s": 0.01,
                "o": {"vs_random": {"win": 0.9, "loss": 0.0 if seed == 1 else 0.01, "tie": 0.1}}}

    def population(seeds, folder, net, overrides=()):
        order.append(f"{net}/{list(seeds)}")
        return {"seconds": 6.0, "command": "pop",
                "members": [{"seed": s, "unbeatable_as_o": True, "o": {}} for s in seeds]}

    monkeypatch.setattr(safe, "run_c", c_run)
    monkeypatch.setattr(safe, "run_ours", lambda *a, **k: pytest.fail("one command of ours a seed"))
    monkeypatch.setattr(safe, "run_population", population)
    block = safe.time_to_safe({25: tmp_path / "ttt-25"}, 2, 1_000, nets=("mlp25", "mlp128"),
                              population=True, singles=False)
    assert order == ["c/1", "c/2", "mlp25/[1, 2]", "mlp128/[1, 2]"]
    pair = block["networks"]["mlp25"]
    assert pair["ours"] is None and pair["ratio_median_seconds"] is None
    assert pair["ratio_population_seconds_per_safe_agent"] == pytest.approx(8.0 / 3.0)  # 8 s / 3 s
    lines = safe.format_lines(block)
    assert lines[0].endswith("seeds 1-2, the C's first, then ours as one population:")
    assert lines[1:5] == [
        "  net=mlp25 (hidden [25]):",
        "    antirez's C ttt-rl, NN_HIDDEN_SIZE 25, 1,000 games: 1/2 unbeatable as O (50%, 95% CI 9%-91%); "
        "median 4.0 s per agent; 8.0 s per safe agent",
        "    ours, the same seeds as one population on one thread: 2/2 unbeatable as O (100%, 95% CI "
        "34%-100%); median 3.0 s per agent; 3.0 s per safe agent",
        "    C / ours: as one population 2.67x"]
    assert not any("ours, python -m" in line for line in lines)
    with pytest.raises(ValueError, match="needs population=True"):
        safe.time_to_safe({25: tmp_path / "ttt-25"}, 2, 1_000, nets=("mlp25",), singles=False)


@pytest.mark.slow  # our whole command in a subprocess, a population of 2 (~10 s)
def test_ours_as_one_population_runs_the_seeds_and_reads_each_members_verdict(tmp_path):
    run = safe.run_population([3, 4], tmp_path, "mlp100", ("debug=tiny",))
    assert [m["seed"] for m in run["members"]] == [3, 4] and run["seconds"] > 0
    for m in run["members"]:
        assert m["unbeatable_as_o"] == (m["o"]["worst_case"] != "loss")
    assert run["command"] == "python -m ttt_research algo=reinforce net=mlp100 seed=3 population.size=2 threads=1"
    with pytest.raises(UserError, match=r"^python -m ttt_research algo=reinforce net=mlp100 seed=3 "
                                        r"population.size=2 threads=1 exited with status 2: error: "):
        safe.run_population([3, 4], tmp_path, "mlp100", ("budget.games=-5",))


def test_the_bench_table_shows_the_time_to_safe_lines(monkeypatch):
    def side(unbeatable, median, per):
        return {"runs": 1, "unbeatable": unbeatable, "share": float(unbeatable),
                "share_ci95": [0.21, 1.0] if unbeatable else [0.0, 0.79], "median_seconds": median,
                "seconds_per_safe_agent": per}

    block = {"seeds": [1], "safe": safe.SAFE, "algo": "reinforce", "games": 2_000_000, "networks": {
        "mlp100": {"hidden": [100], "ratio_median_seconds": 2.0, "ratio_seconds_per_safe_agent": None,
                   "antirez_note": None,
                   "antirez": {**side(0, 30.0, None), "games": 2_000_000, "hidden": 100},
                   "ours": side(1, 15.0, 15.0)},
        "mlp128": {"hidden": [128, 128], "ratio_median_seconds": None, "ratio_seconds_per_safe_agent": None,
                   "antirez_note": safe.NO_C, "antirez": None, "ours": side(1, 14.0, 14.0)}}}
    res = {"device": "cpu", "host": {"cpu": "Test CPU", "logical_cpus": 2},
           "threads": {"engine": 1, "reinforce": 1, "ppo": 1}, "versions": {"torch": "2.x"},
           "env_games_per_s": 1e7,
           "details": {"env_best_batch": 65536, "reinforce_games_per_s_per_run": [2e5]},
           "reinforce_games_per_s": 2e5, "ppo_steps_per_s": 1e5, "time_to_unbeatable_s": 2.0,
           "eval_s": 0.01, "move_latency_ms": {"torch": 0.02, "onnxruntime": 0.007},
           "compare": {"antirez": {"games": 300_000, "runs": 1, "seconds": 4.0, "games_per_s": 75_000.0,
                                   "games_per_s_per_run": [75_000.0], "ratio_reinforce": 2.67, "threads": 1,
                                   "timed": "the process", "time_to_safe": block}}}
    text = format_table(res)
    assert ("antirez's C ttt-rl, NN_HIDDEN_SIZE 100, 2,000,000 games: 0/1 unbeatable as O (0%, 95% CI "
            "0%-79%); median 30.0 s per agent; no safe agent") in text
    assert "C / ours: median seconds 2.00x, seconds per safe agent n/a (a side has no safe agent)" in text
    assert "net=mlp128 (hidden [128, 128]):\n    antirez's C has one hidden layer only" in text


def test_the_bench_refuses_bad_safe_options_in_one_line(capsys):
    assert main(["--safe-seeds", "-1"]) == 2
    assert capsys.readouterr().err.strip() == "error: --safe-seeds must be 0 or a positive integer, got -1"
    assert main(["--antirez-safe-games", "0"]) == 2
    assert capsys.readouterr().err.strip() == "error: --antirez-safe-games must be a positive integer, got 0"
    for bad in ("mlp7", "mlp25,mlp25", ""):
        assert main(["--safe-nets", bad]) == 2
        assert capsys.readouterr().err.strip() == (
            "error: --safe-nets must be some of mlp25,mlp100,mlp128, comma-separated, each once; "
            f"got {bad!r}")


@pytest.mark.slow  # our whole command in a subprocess (~10 s of imports and a tiny run)
@needs_c
def test_time_to_safe_with_tiny_budgets_runs_both_programs(seeded):
    block = safe.time_to_safe({100: seeded}, 1, 20_000, ("debug=tiny",), nets=("mlp100",))
    assert block["seeds"] == [1]
    pair = block["networks"]["mlp100"]
    for side in ("antirez", "ours"):
        s = pair[side]
        assert s["runs"] == 1 and len(s["per_seed"]) == 1 and 0 <= s["unbeatable"] <= 1
        assert 0.0 <= s["share_ci95"][0] <= s["share"] <= s["share_ci95"][1] <= 1.0
        assert s["median_seconds"] == s["total_seconds"] == s["per_seed"][0]["seconds"] > 0
        run = s["per_seed"][0]
        assert run["unbeatable_as_o"] == (run["o"]["worst_case"] != "loss")
        assert (s["seconds_per_safe_agent"] is None) == (s["unbeatable"] == 0)
    c = pair["antirez"]["per_seed"][0]
    assert c["parity_max_abs_diff"] < 1e-4 and c["eval_s"] > 0
    ours = pair["ours"]
    assert ours["config"]["budget_games"] == 2048 and ours["command"].endswith(" debug=tiny")
    assert ours["config"]["net_hidden"] == [100] and ours["config"]["algo"].endswith("reinforce.Reinforce")
    assert pair["ratio_median_seconds"] == pytest.approx(c["seconds"] / ours["median_seconds"])


@pytest.mark.slow  # three compilations and the probes: over 3 s on the 2-core host
@needs_c
def test_the_bench_builds_the_seeded_copy_and_reports_under_compare_antirez(monkeypatch, capsys):
    import json

    from ttt_research.bench import suite

    stub_figures(monkeypatch, suite)  # the figures run from bench/suite.py
    calls = []

    def fake_time_to_safe(binaries, seeds, games, overrides, nets, log, population):
        calls.append(({w: (b.name, b.is_file()) for w, b in binaries.items()}, seeds, games, overrides, nets,
                      population))
        return {"seeds": list(range(1, seeds + 1)), "stub": True}

    monkeypatch.setattr(safe, "time_to_safe", fake_time_to_safe)
    src = ["--compare", "antirez", "--antirez-src", str(ANTIREZ_SRC), "--quick", "--json", "--no-populations"]
    assert main([*src, "--antirez-safe-games", "5000"]) == 0
    out = capsys.readouterr()
    res = json.loads(out.out)
    # --quick: 3 seeds; the patched copies (hidden 25 and 100: the card's one-layer networks) were
    # built, probed, and handed over with their budget.
    built = {25: ("ttt-seeded-h25", True), 100: ("ttt-seeded-h100", True)}
    assert calls == [(built, 3, 5000, (), ("mlp25", "mlp100", "mlp128"), True)]  # ours as a population too
    assert res["compare"]["antirez"]["time_to_safe"] == {"seeds": [1, 2, 3], "stub": True}
    assert ("bench: time to a safe agent: antirez's C (5,000 games, built with each one-layer network's "
            "hidden size) and our algo=reinforce, nets mlp25, mlp100, mlp128, 3 seed(s)") in out.err
    assert main([*src, "--safe-seeds", "0"]) == 0  # skipped: nothing built, nothing run
    assert "time_to_safe" not in json.loads(capsys.readouterr().out)["compare"]["antirez"] and len(calls) == 1
    assert main([*src, "--antirez-safe-games", "5000", "--no-safe-population"]) == 0
    assert calls[-1][-1] is False
