"""A run directory's records: config.json once, metrics.jsonl appended at every log step."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from transformers import TrainerCallback


def _plain(value: object) -> object:
    if dataclasses.is_dataclass(value):
        return {k: _plain(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return str(value) if isinstance(value, Path) else value


def write_config(run_dir: Path, config: object, **extra: object) -> None:
    """config.json: the typed config plus whatever the run adds (curriculum plan, data manifest, versions)."""
    import peft
    import torch
    import transformers
    import trl

    run_dir.mkdir(parents=True, exist_ok=True)
    versions = {"torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__, "peft": peft.__version__}
    record = {"config": _plain(config), "versions": versions, **{k: _plain(v) for k, v in extra.items()}}
    (run_dir / "config.json").write_text(json.dumps(record, indent=2) + "\n")


class MetricsLog(TrainerCallback):
    """Append every logged dict (loss, domain CE, KL, rewards, step time) to metrics.jsonl."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.last = time.perf_counter()
        self.last_step = 0

    def on_train_begin(self, args, state, control, **kwargs) -> None:
        self.last, self.last_step = time.perf_counter(), state.global_step

    def on_log(self, args, state, control, logs=None, **kwargs) -> None:
        if not state.is_world_process_zero or not logs:
            return
        now = time.perf_counter()
        steps = state.global_step - self.last_step
        record = {"step": state.global_step, **logs}
        if steps > 0:
            record["s_per_step"] = round((now - self.last) / steps, 2)
        self.last, self.last_step = now, state.global_step
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
