"""Comparing two eval reports scenario by scenario (`talkline eval --against`)."""

import json

import pytest

from training.compare import ReportMismatchError, compare, mcnemar_p
from training.eval import main_rescore


def report(model: str, passed: dict[str, bool], kinds: dict[str, str]) -> dict:
    return {"model": model, "results": [{"id": i, "kind": kinds[i], "passed": p} for i, p in passed.items()]}


def test_mcnemar_p_is_the_exact_two_sided_binomial_tail_of_the_changed_scenarios():
    assert mcnemar_p(0, 0) == 1.0
    assert mcnemar_p(5, 5) == 1.0
    assert mcnemar_p(10, 0) == pytest.approx(2 / 1024)
    assert mcnemar_p(0, 10) == pytest.approx(2 / 1024)
    assert mcnemar_p(8, 2) == pytest.approx(2 * (1 + 10 + 45) / 1024)
    assert mcnemar_p(27, 32) == pytest.approx(0.6029, abs=1e-3)


def test_compare_counts_passes_gains_and_losses_per_kind_and_overall():
    kinds = {"a": "fact", "b": "fact", "c": "fact", "d": "unknown", "e": "unknown"}
    before = report("old", {"a": True, "b": False, "c": True, "d": False, "e": True}, kinds)
    after = report("new", {"a": True, "b": True, "c": False, "d": True, "e": True}, kinds)
    out = compare(before, after)
    assert (out["before"], out["after"]) == ("old", "new")
    every, fact, unknown = out["kinds"]["all"], out["kinds"]["fact"], out["kinds"]["unknown"]
    assert (every["scenarios"], every["before"], every["after"]) == (5, 3, 4)
    assert (every["gained"], every["lost"]) == (["b", "d"], ["c"])
    assert (fact["gained"], fact["lost"], unknown["gained"], unknown["lost"]) == (["b"], ["c"], ["d"], [])
    assert every["p_value"] == pytest.approx(1.0) and unknown["p_value"] == pytest.approx(1.0)


def test_reports_of_different_scenarios_are_not_compared():
    kinds = {"a": "fact", "b": "fact"}
    with pytest.raises(ReportMismatchError, match="different scenarios"):
        compare(report("old", {"a": True}, kinds), report("new", {"a": True, "b": False}, kinds))


def test_a_rescored_report_carries_its_comparison_with_the_earlier_one(tmp_path, capsys):
    checks = {"must_include_all": ["5 dollars"], "must_include_any": [], "must_not_include": [], "max_words": 40, "no_markdown": True}
    scenarios = [{"id": i, "checks": checks} for i in ("x", "y")]
    (tmp_path / "s.jsonl").write_text("".join(json.dumps(s) + "\n" for s in scenarios))
    replies = {"x": "It is five dollars.", "y": "I don't have that information."}
    new = {"model": "new", "results": [{"id": i, "kind": "fact", "sector": "bakery", "reply": r} for i, r in replies.items()]}
    (tmp_path / "new.json").write_text(json.dumps(new))
    before = report("old", {"x": False, "y": True}, {"x": "fact", "y": "fact"})
    saved = main_rescore(tmp_path / "s.jsonl", tmp_path / "new.json", tmp_path / "out.json", before)
    assert [r["passed"] for r in saved["results"]] == [True, False]
    assert json.loads((tmp_path / "out.json").read_text())["against"]["kinds"]["all"]["gained"] == ["x"]
    assert "old -> new" in capsys.readouterr().out
