"""What Hydra writes before the project's checks is checked before Hydra writes it
(train/hydra_writes.py): ``hydra.output_subdir`` and a sweep folder's ``multirun.yaml``. A
refusal leaves every file of the folder byte for byte as it was, whatever the command line.

Before: ``hydra.output_subdir=.hydra seed=7`` into a finished seed-0 run was refused (exit 2)
after Hydra had rewritten ``.hydra/config.yaml`` to say ``seed: 7``; a refused ``seed=5,6``
sweep into a sweep folder rewrote its ``multirun.yaml`` to name the jobs of seeds 0 and 1 as
``seed=5,6``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.command import checksums, cli, copy_of, one_error_line

TINY = ["debug=tiny", "progress=false", "threads=1"]


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """A finished tiny run (seed 0) and a finished sweep of two tiny jobs (seeds 0 and 1)."""
    base = tmp_path_factory.mktemp("writes")
    code, _, err = cli(*TINY, f"hydra.run.dir={base / 'run'}")
    assert code == 0, err
    code, _, err = cli("-m", *TINY, "seed=0,1", f"hydra.sweep.dir={base / 'sweep'}")
    assert code == 0, err
    return base


@pytest.mark.parametrize("subdir", [".hydra", "other", ".hydra/../.hydra"])
@pytest.mark.parametrize("resume", [[], ["resume=true"]])
def test_an_output_subdir_is_refused_before_hydra_writes_it(made, tmp_path, subdir, resume):
    folder = copy_of(made, "run", tmp_path)
    before = checksums(folder)
    code, _, err = cli(*TINY, "seed=7", *resume, f"hydra.output_subdir={subdir}", f"hydra.run.dir={folder}")
    assert code == 2
    line = one_error_line(err)
    assert line.startswith(f"error: hydra.output_subdir={subdir}: the run writes Hydra's files")
    assert checksums(folder) == before
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in (made / "run").iterdir())


@pytest.mark.slow  # four refused commands: over 3 s on the 2-core host
def test_an_output_subdir_leaves_no_folder_for_a_new_run_or_sweep(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for args in (["hydra.run.dir=new"], [], ["-m", "seed=0,1"], ["-m", "seed=0,1", "hydra.sweep.dir=sw"]):
        code, _, err = cli(*args, *TINY, "hydra.output_subdir=.hydra")
        assert code == 2 and "hydra.output_subdir=.hydra" in one_error_line(err)
    assert list(tmp_path.iterdir()) == []


def test_a_new_sweep_into_a_sweep_folder_is_refused_before_its_record_is_rewritten(made, tmp_path):
    sweep = copy_of(made, "sweep", tmp_path)
    before = checksums(sweep)
    code, out, err = cli("-m", *TINY, "seed=5,6", f"hydra.sweep.dir={sweep}")
    assert code == 2
    assert one_error_line(err) == (f"error: {sweep} already holds a sweep ({sweep / 'multirun.yaml'}): "
                                   "resume=true continues its jobs; choose another hydra.sweep.dir for "
                                   "a new sweep")
    assert "Launching" not in out  # refused before the sweeper started
    assert checksums(sweep) == before


@pytest.mark.slow  # a sweep's first job refused once its checkpoint is read: over 3 s on the 2-core host
def test_a_refused_continuation_puts_the_sweeps_record_back(made, tmp_path):
    """resume=true rewrites multirun.yaml as the sweep starts (Hydra's sweeper); its first job
    is refused (another seed than its folder's run): the record goes back as it was."""
    sweep = copy_of(made, "sweep", tmp_path)
    before = checksums(sweep)
    code, _, err = cli("-m", *TINY, "seed=5,6", "resume=true", f"hydra.sweep.dir={sweep}")
    assert code == 2
    assert "seed=5 (the run: 0)" in err.strip().splitlines()[-1]
    assert checksums(sweep) == before


@pytest.mark.parametrize("where", ["default", "empty", "missing"])
def test_a_continuation_needs_a_sweep_folder(tmp_path, monkeypatch, where):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    folder = [] if where == "default" else [f"hydra.sweep.dir={where}"]
    code, _, err = cli("-m", *TINY, "seed=0,1", "resume=true", *folder)
    assert code == 2 and one_error_line(err).startswith("error: resume=true with -m continues")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"] and not any((tmp_path / "empty").iterdir())


def test_a_ddp_process_the_job_started_reruns_the_sweep_into_its_folder(tmp_path, monkeypatch):
    """Found by review: Lightning starts a trainer=ddp job's second process by rerunning the
    command, ``-m`` and ``hydra.sweep.dir`` included, once the first wrote the sweep's record:
    refused as "a new sweep into a sweep folder", it never met the first process."""
    import os

    from omegaconf import OmegaConf

    from ttt_research.train import hydra_writes, launch

    (tmp_path / "multirun.yaml").write_text("hydra: {}\n")
    config = OmegaConf.create({"resume": False, "hydra": {
        "output_subdir": None, "sweep": {"dir": str(tmp_path)},
        "sweeper": {"_target_": hydra_writes.BASIC_SWEEPER}, "overrides": {"hydra": [], "task": []}}})
    monkeypatch.delenv(launch.MARK, raising=False)
    with pytest.raises(hydra_writes.Refused):  # a user's new sweep there: refused, as before
        hydra_writes.FirstChecks().on_multirun_start(config)
    monkeypatch.setenv(launch.MARK, str(os.getppid()))  # started by this run's first process
    hydra_writes.FirstChecks().on_multirun_start(config)
