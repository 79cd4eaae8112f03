"""`talkline eval`: answer held-out scenarios with the embedded engine (greedy) and report check pass rates."""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from pathlib import Path

import torch
from tqdm import tqdm

from models.engine import Engine
from pipeline.profile import parse_profile
from pipeline.prompt import Message
from pipeline.questions import ask, asked_messages
from pipeline.readout import DeclineGuard
from pipeline.retrieval import Retriever, served_messages
from pipeline.tools import OPEN
from training.checks import CHECK_NAMES, failure, run_checks
from training.compare import ReportMismatchError, compare, print_comparison


def load_scenarios(path: Path, limit: int | None = None) -> list[dict]:
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows[:limit] if limit else rows


def answer(
    engine: Engine, scenario: dict, max_new_tokens: int = 60, retriever: Retriever | None = None, readout: bool = True
) -> tuple[str, int]:
    """The engine's greedy reply to a scenario's history, prompted exactly as a call would be (with the facts the
    retriever ranks for the turn; none without one), and the questions the turn was asked as (two: answered in turn).
    A reply that declines a question whose fact the call would read out is that fact, as a call says it (unless
    `readout` is off, as a profile's `llm.read_out_facts: false` turns it off)."""
    profile = parse_profile(scenario["profile"], scenario.get("id", "<scenario>"))
    if not readout:
        profile = profile.model_copy(update={"llm": profile.llm.model_copy(update={"read_out_facts": False})})
    history = [Message(m["role"], m["content"]) for m in scenario["messages"] if m["role"] in ("user", "assistant", "tool")]
    fact = None
    if retriever is None or history[-1].role != "user":
        messages, then = served_messages(profile, history, retriever), None
    else:
        earlier = retriever.with_facts(profile, history[:-1])
        asked = ask(retriever, profile, history)
        messages, then = asked_messages(profile, [*earlier, history[-1]], asked)
        fact = asked.readout
    session = engine.new_session()
    reply = "".join(engine.generate_text(session, engine.encode_chat(messages), max_new_tokens)).strip()
    if fact is not None:
        return DeclineGuard(fact).apply(reply), 1
    if then is None or OPEN in reply:
        return reply, 1
    return reply + " " + "".join(engine.generate_text(session, engine.encode_chat(then(reply)), max_new_tokens)).strip(), 2


def _rate(flags: list[bool]) -> float:
    return round(sum(flags) / len(flags), 4) if flags else 0.0


def summarize(results: list[dict]) -> dict:
    """Overall pass rate (every check of a scenario passes), per check, per sector and per kind."""
    by_check, by_sector, by_kind = defaultdict(list), defaultdict(list), defaultdict(list)
    for r in results:
        for name, ok in r["checks"].items():
            by_check[name].append(ok)
        by_sector[r["sector"]].append(r["passed"])
        by_kind[r["kind"]].append(r["passed"])
    return {
        "pass_rate": _rate([r["passed"] for r in results]),
        "per_check": {k: _rate(by_check[k]) for k in CHECK_NAMES if k in by_check},
        "per_sector": {k: _rate(v) for k, v in sorted(by_sector.items())},
        "per_kind": {k: _rate(v) for k, v in sorted(by_kind.items())},
        "failures": {k: dict(Counter(r["failure"] for r in results if r["kind"] == k and r.get("failure"))) for k in sorted(by_kind)},
        "scenarios": len(results),
    }


def evaluate(
    engine: Engine, scenarios: list[dict], max_new_tokens: int = 60, retriever: Retriever | None = None, readout: bool = True
) -> list[dict]:
    results = []
    for s in tqdm(scenarios, desc="eval", unit="scenario"):
        reply, questions = answer(engine, s, max_new_tokens, retriever, readout)
        checks = run_checks(reply, s["checks"])
        meta = s.get("meta", {})
        results.append(
            {
                "id": s["id"],
                "sector": meta.get("sector", s["profile"].get("sector", "")),
                "kind": meta.get("kind", ""),
                "reply": reply,
                "questions": questions,
                "checks": checks,
                "passed": all(checks.values()),
                "failure": failure(meta.get("kind", ""), reply, checks),
            }
        )
    return results


def rescore(report: dict, scenarios: list[dict]) -> list[dict]:
    """A saved report's replies checked again against the scenarios' current checks (no model needed)."""
    by_id = {s["id"]: s for s in scenarios}
    results = []
    for r in report["results"]:
        checks = run_checks(r["reply"], by_id[r["id"]]["checks"])
        results.append({**r, "checks": checks, "passed": all(checks.values()), "failure": failure(r["kind"], r["reply"], checks)})
    return results


def print_table(summary: dict) -> None:
    print(f"\n{'':<28}{'pass rate':>10}")
    print(f"{'all checks':<28}{summary['pass_rate']:>10.1%}   ({summary['scenarios']} scenarios)")
    for title in ("per_check", "per_kind", "per_sector"):
        print(f"-- {title.replace('_', ' ')}")
        for name, rate in summary[title].items():
            print(f"{name:<28}{rate:>10.1%}")
    print("-- failures per kind")
    for kind, reasons in summary["failures"].items():
        print(f"{kind:<28}" + ", ".join(f"{reason} {n}" for reason, n in sorted(reasons.items(), key=lambda x: -x[1])))


def write_report(report: dict, out: Path | None, against: dict | None = None) -> dict:
    """Print the report (and, given an earlier report, the comparison with it, which the report keeps) and save it."""
    print_table(report)
    if against is not None:
        try:
            report["against"] = compare(against, report)
            print_comparison(report["against"])
        except ReportMismatchError as e:
            print(f"not compared: {e}")
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(report, indent=2) + "\n")
    return report


def main_rescore(scenarios: Path, report_path: Path, out: Path | None, against: dict | None = None) -> dict:
    """Re-check a saved report's replies (e.g. after a fix to the checks) and print and save the new report."""
    report = json.loads(Path(report_path).read_text())
    results = rescore(report, load_scenarios(scenarios))
    rescored = {**report, "scenarios_file": str(scenarios), "rescored_from": str(report_path), **summarize(results), "results": results}
    return write_report(rescored, out, against)


def main(
    scenarios: Path,
    model: str,
    out: Path | None,
    limit: int | None = None,
    max_new_tokens: int = 60,
    retrieval: bool = True,
    weights: str = "bf16",
    against: dict | None = None,
    readout: bool = True,
) -> dict:
    """Load the model (base, tuned, a folder, an adapter or a GGUF), run every scenario, print and save the report."""
    from models.assets import llm_dir
    from models.embedder import Embedder

    torch.set_num_threads(1)
    path = llm_dir(model)
    t0 = time.perf_counter()
    engine = Engine.load(path, weights=weights)
    load_s = time.perf_counter() - t0
    retriever = Retriever(Embedder()) if retrieval else None
    rows = load_scenarios(scenarios, limit)
    t0 = time.perf_counter()
    results = evaluate(engine, rows, max_new_tokens, retriever, readout)
    report = {
        "model": model,
        "model_path": str(path),
        "weights": weights,
        "scenarios_file": str(scenarios),
        "retrieval": retrieval,
        "readout": readout,
        "load_s": round(load_s, 1),
        "eval_s": round(time.perf_counter() - t0, 1),
        **summarize(results),
        "results": results,
    }
    return write_report(report, out, against)
