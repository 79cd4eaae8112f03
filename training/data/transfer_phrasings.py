"""Twenty hand-written ways to ask for a person, on held-out brands whose profile declares `transfer_to_human`: the
set behind "a caller who asks for a person is transferred at once". Written apart from the training pools (a test
checks that no line appears in them); `training/scenarios_transfer_heldout.jsonl` is this module's output
(`python -m training.data.transfer_phrasings` writes it)."""

from __future__ import annotations

import json
from pathlib import Path

from training.data.dialogues import MAX_WORDS, PERSONA_BREAKS, TRANSFER_WORDS
from training.data.generate import write_jsonl
from training.data.realistic.generate import SCENARIOS_PATH as BRANDS_SCENARIOS_PATH

SCENARIOS_PATH = Path(__file__).resolve().parents[1] / "scenarios_transfer_heldout.jsonl"
BRANDS = 5  # held-out brands the phrasings rotate over

PHRASINGS = (
    "could i get a human on the line",
    "Is there someone I could speak with rather than an automated system?",
    "is someone real able to pick up",
    "I'd like to speak to a member of staff.",
    "Could you put me through to whoever's in charge?",
    "You're a recording, aren't you? I'd like an actual member of the team.",
    "hello? is there an operator i can talk to",
    "Is anybody actually there? I need to talk to a real person about my booking.",
    "Hand me over to an agent, please.",
    "who's the manager today i want to speak with them",
    "Can you connect me with someone on your team?",
    "I'd prefer to talk this through with a colleague of yours, if that's alright.",
    "is there a live person i can talk to",
    "Please pass me on to somebody who works there.",
    "I need a human to sort this out, this is going nowhere.",
    "Can I have a word with one of the staff?",
    "put me through to one of your advisers",
    "My mum asked me to call, she wants to talk to an actual person there.",
    "I'd like to talk to customer service, a human one.",
    "just need to speak to somebody there",
)


def transfer_profiles(heldout_scenarios: Path) -> list[dict]:
    """The first BRANDS distinct held-out brand profiles that declare transfer_to_human, in file order."""
    profiles: dict[str, dict] = {}
    for line in heldout_scenarios.read_text(encoding="utf-8").splitlines():
        profile = json.loads(line)["profile"]
        if any(t["name"] == "transfer_to_human" for t in profile.get("tools", [])):
            profiles.setdefault(profile["id"], profile)
        if len(profiles) == BRANDS:
            break
    return list(profiles.values())


def scenarios(heldout_scenarios: Path) -> list[dict]:
    """One scenario per phrasing: the brand's greeting, the caller's request; a pass transfers at once, saying so."""
    profiles = transfer_profiles(heldout_scenarios)
    rows = []
    for i, line in enumerate(PHRASINGS):
        profile = profiles[i % len(profiles)]
        rows.append(
            {
                "checks": {
                    "action": "transfer_to_human",
                    "arguments": {},
                    "max_words": MAX_WORDS,
                    "must_include_all": [],
                    "must_include_any": TRANSFER_WORDS,
                    "must_not_include": PERSONA_BREAKS,
                    "no_markdown": True,
                },
                "id": f"{profile['id']}-ask-for-person-{i}",
                "messages": [{"content": profile["greeting"], "role": "assistant"}, {"content": line, "role": "user"}],
                "meta": {"intent": "human_request", "kind": "human", "sector": profile["sector"], "tone": "hand-written"},
                "profile": profile,
            }
        )
    return rows


if __name__ == "__main__":
    write_jsonl(SCENARIOS_PATH, scenarios(BRANDS_SCENARIOS_PATH))
