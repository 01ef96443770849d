"""The console scripts the package declares, each with the ``main`` it runs: checked against
pyproject.toml (tests/commands/test_cli.py) and the wheel's entry_points.txt
(tests/system/test_packaging.py)."""

SCRIPTS = {"ttt-train": "ttt_research.__main__:main", "ttt-evaluate": "ttt_research.evaluate:main",
           "ttt-play": "ttt_research.play:main", "ttt-export": "ttt_research.export:main",
           "ttt-report": "ttt_research.report:main", "ttt-bench": "ttt_research.bench:main",
           "ttt-dashboard": "ttt_research.dashboard:main", "ttt-tournament": "ttt_research.tournament:main",
           "ttt-solve": "ttt_research.solve:main"}
