"""`talkline train ship`: copy a trained adapter (models/adapters/talkline) or drafter (models/drafters/talkline) into
place with the record of how it was made."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from models.assets import DRAFTER_DIR, TUNED_ADAPTER_DIR
from models.eagle3 import CONFIG_NAME, WEIGHTS_NAME
from models.lora import ADAPTER_CONFIG, ADAPTER_WEIGHTS
from models.phrases import PHRASES_NAME

EVAL_KEYS = ("scenarios_file", "pass_rate", "per_check", "per_kind", "scenarios")


def _last_metrics(run_dir: Path) -> dict:
    """The run's final training record (the summary line) and its last logged step."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    logged = [r for r in rows if "loss" in r]
    return {"last_logged": logged[-1] if logged else None, "summary": rows[-1] if rows else None}


def _without_lists(value: object) -> object:
    """A benchmark report's figures: its per-item lists dropped, at any depth."""
    if isinstance(value, dict):
        return {k: _without_lists(v) for k, v in value.items() if not isinstance(v, list)}
    return value


def _eval_summary(path: Path) -> dict:
    """A `talkline eval` report's pass rates, or a benchmark report's figures."""
    report = json.loads(path.read_text())
    if not any(k in report for k in EVAL_KEYS):
        return _without_lists(report)
    return {k: report[k] for k in EVAL_KEYS if k in report}


def ship(
    source: Path,
    runs: list[Path],
    evals: list[Path],
    reproduce: str,
    out: Path = TUNED_ADAPTER_DIR,
    files: tuple[str, ...] = (ADAPTER_CONFIG, ADAPTER_WEIGHTS),
    optional: tuple[str, ...] = (),
) -> Path:
    """The adapter's (or drafter's) files, plus run.json: each stage's config and final metrics, the eval or
    benchmark results, and the commands that reproduce it."""
    out.mkdir(parents=True, exist_ok=True)
    for name in files:
        shutil.copyfile(source / name, out / name)
    for name in optional:
        (out / name).unlink(missing_ok=True)
        if (source / name).exists():
            shutil.copyfile(source / name, out / name)
    record = {
        "stages": [run.name for run in runs],
        "runs": {run.name: {"config": json.loads((run / "config.json").read_text()), "final_metrics": _last_metrics(run)} for run in runs},
        "eval": {path.stem: _eval_summary(path) for path in evals},
        "reproduce": reproduce,
    }
    (out / "run.json").write_text(json.dumps(record, indent=2) + "\n")
    return out


def ship_drafter(drafter: Path, runs: list[Path], benches: list[Path], reproduce: str, out: Path = DRAFTER_DIR) -> Path:
    """An EAGLE3 drafter into models/drafters/talkline, which turns speculative decoding on by default."""
    return ship(drafter, runs, benches, reproduce, out, files=(CONFIG_NAME, WEIGHTS_NAME), optional=(PHRASES_NAME,))
