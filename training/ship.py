"""`talkline train ship`: copy a trained adapter into models/adapters/talkline with the record of how it was made."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from models.assets import TUNED_ADAPTER_DIR
from models.lora import ADAPTER_CONFIG, ADAPTER_WEIGHTS


def _last_metrics(run_dir: Path) -> dict:
    """The run's final training record (the summary line) and its last logged step."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    logged = [r for r in rows if "loss" in r]
    return {"last_logged": logged[-1] if logged else None, "summary": rows[-1] if rows else None}


def _eval_summary(path: Path) -> dict:
    report = json.loads(path.read_text())
    return {k: report[k] for k in ("scenarios_file", "pass_rate", "per_check", "per_kind", "scenarios") if k in report}


def ship(adapter: Path, runs: list[Path], evals: list[Path], reproduce: str, out: Path = TUNED_ADAPTER_DIR) -> Path:
    """Adapter weights and config, plus run.json: each stage's config and final metrics, the eval results, and the
    commands that reproduce it."""
    out.mkdir(parents=True, exist_ok=True)
    for name in (ADAPTER_CONFIG, ADAPTER_WEIGHTS):
        shutil.copyfile(adapter / name, out / name)
    record = {
        "stages": [run.name for run in runs],
        "runs": {
            run.name: {"config": json.loads((run / "config.json").read_text()), "final_metrics": _last_metrics(run)}
            for run in runs
        },
        "eval": {path.stem: _eval_summary(path) for path in evals},
        "reproduce": reproduce,
    }
    (out / "run.json").write_text(json.dumps(record, indent=2) + "\n")
    return out
