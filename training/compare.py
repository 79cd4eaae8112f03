"""Two `talkline eval` reports on the same scenarios, side by side: per kind, which scenarios one passes and the other
fails, and whether that difference could be chance (an exact McNemar test on those scenarios)."""

from __future__ import annotations

from collections import defaultdict
from math import comb


class ReportMismatchError(ValueError):
    """The two reports did not answer the same scenarios; compare reports of one scenarios file."""


def mcnemar_p(gained: int, lost: int) -> float:
    """Two-sided exact McNemar p-value: the chance of a split at least this uneven among `gained + lost` scenarios that
    changed, if either direction were equally likely."""
    n = gained + lost
    if n == 0:
        return 1.0
    tail = sum(comb(n, i) for i in range(min(gained, lost) + 1)) / 2**n
    return min(1.0, 2 * tail)


def compare(before: dict, after: dict) -> dict:
    """Passes per kind in each report, the scenarios gained and lost, and the McNemar p-value, overall and per kind."""
    old = {r["id"]: r for r in before["results"]}
    new = {r["id"]: r for r in after["results"]}
    if old.keys() != new.keys():
        missing, extra = sorted(old.keys() - new.keys()), sorted(new.keys() - old.keys())
        raise ReportMismatchError(f"the reports answer different scenarios (only before: {missing[:3]}, only after: {extra[:3]})")
    rows: dict[str, dict] = defaultdict(lambda: {"scenarios": 0, "before": 0, "after": 0, "gained": [], "lost": []})
    for sid, a in old.items():
        b = new[sid]
        for kind in ("all", a.get("kind") or "-"):
            row = rows[kind]
            row["scenarios"] += 1
            row["before"] += a["passed"]
            row["after"] += b["passed"]
            if b["passed"] and not a["passed"]:
                row["gained"].append(sid)
            elif a["passed"] and not b["passed"]:
                row["lost"].append(sid)
    for row in rows.values():
        row["p_value"] = round(mcnemar_p(len(row["gained"]), len(row["lost"])), 4)
    return {"before": before.get("model", "?"), "after": after.get("model", "?"), "kinds": dict(rows)}


def print_comparison(comparison: dict) -> None:
    print(f"\n{comparison['before']} -> {comparison['after']}")
    print(f"{'kind':<14}{'scenarios':>10}{'before':>8}{'after':>8}{'gained':>8}{'lost':>6}{'p':>8}")
    kinds = comparison["kinds"]
    for kind in ["all", *sorted(k for k in kinds if k != "all")]:
        r = kinds[kind]
        print(f"{kind:<14}{r['scenarios']:>10}{r['before']:>8}{r['after']:>8}{len(r['gained']):>8}{len(r['lost']):>6}{r['p_value']:>8.3f}")
