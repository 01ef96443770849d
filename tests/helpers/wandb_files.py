"""Reading what W&B wrote offline, for the tests of tracking (single runs and populations)."""

import os
import struct
from pathlib import Path


def no_wandb_account(home: Path) -> dict:
    """An environment with no W&B key anywhere (no variable, an empty home: no ~/.netrc)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env["HOME"] = str(home)
    return env


def wandb_records(run_dir: Path) -> list:
    """The records of the one offline W&B run under ``run_dir`` (W&B's .wandb log: a 7-byte
    header, then LevelDB-style chunks of protobuf ``Record``s in 32 KiB blocks)."""
    from wandb.proto import wandb_internal_pb2 as pb

    (path,) = run_dir.glob("wandb/offline-run-*/run-*.wandb")
    raw = path.read_bytes()
    assert raw[:4] == b":W&B"
    pos, buf, out = 7, b"", []
    while pos + 7 <= len(raw):
        left = 32768 - pos % 32768
        if left < 7:  # a block's tail too short for a chunk header is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", raw[pos:pos + 7])
        pos += 7
        buf += raw[pos:pos + length]
        pos += length
        if kind in (1, 4):  # a full record, or the last chunk of one
            rec = pb.Record()
            rec.ParseFromString(buf)
            out.append(rec)
            buf = b""
    return out


def of_kind(records, kind):
    return [r for r in records if r.WhichOneof("record_type") == kind]


def key(item) -> str:
    return item.key or "/".join(item.nested_key)  # W&B writes some keys as a path


def history(records) -> list[dict]:
    """The logged rows, in order, as {metric: value}."""
    import json

    return [{key(i): json.loads(i.value_json) for i in r.history.item} for r in of_kind(records, "history")]


def step_metrics(records) -> dict:
    """{metric name or glob: the metric it is plotted against} from the ``define_metric`` records."""
    return {(r.metric.name or r.metric.glob_name): r.metric.step_metric for r in of_kind(records, "metric")}


def run_config(records) -> dict:
    """The run's config, as W&B received it (the last value of each key)."""
    import json

    return {key(i): json.loads(i.value_json) for r in of_kind(records, "config") for i in r.config.update}
