"""Tests of train/: training single runs and populations, validation and limits, the run
folder, rows and checkpoints, signals, tracking, the console and the job log, DDP."""
