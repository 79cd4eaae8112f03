"""Speculative decoding settings of the embedded engine: the one set of defaults that `talkline serve`,
`talkline engine` and `talkline bench spec` share."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from models.assets import default_drafter_dir


@dataclass(frozen=True)
class SpecConfig:
    """The shipped configuration unless a field is given: the committed EAGLE3 drafter (none committed: plain
    decoding), chains of up to 4 drafts that end below 0.6 drafter confidence, prompt lookup and the phrase memory."""

    drafter: Path | None = field(default_factory=default_drafter_dir)
    draft_tokens: int = 4  # longest draft chain per target forward
    min_confidence: float = 0.6  # after its first draft, a chain ends once the drafter's top probability is below this
    prompt_lookup: bool = True  # greedy chains also draft from earlier context (models/lookup.py)...
    phrases: bool = True  # ...and, with it, from the target's past replies (the drafter folder's phrases.json)
    learn_phrases: bool = True  # every reply served joins the phrase memory
