"""EAGLE3 speculative decoding: draft k tokens with the drafter, verify them in one target forward."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch

from models.eagle3 import DrafterCache, Eagle3Drafter
from models.lookup import ContextLookup
from models.phrases import PhraseMemory
from models.session import GenerationStats, Session


def accept_drafts(
    target_logits: torch.Tensor,
    drafts: list[int],
    draft_probs: torch.Tensor | None,
    temperature: float,
    generator: torch.Generator | None = None,
) -> tuple[int, int]:
    """(accepted draft count, next token) for target logits [k+1, V] over k drafted tokens.

    Greedy: the longest prefix equal to the target's argmax, then the target's own token.
    Sampling: accept d_i with probability min(1, p_i(d_i) / q_i(d_i)); on the first rejection draw from
    norm(max(p_i - q_i, 0)); if all are accepted, draw the bonus token from p_k. The output is distributed
    exactly as the target's (Leviathan et al., 2023). draft_probs q: [k, V] over the target vocabulary.
    """
    if temperature <= 0:
        target = target_logits.argmax(dim=-1).tolist()
        n = 0
        while n < len(drafts) and drafts[n] == target[n]:
            n += 1
        return n, target[n]
    p = torch.softmax(target_logits.float() / temperature, dim=-1)  # [k+1, V]
    for i, d in enumerate(drafts):
        if torch.rand(1, generator=generator).item() * draft_probs[i, d] < p[i, d]:
            continue
        residual = (p[i] - draft_probs[i]).clamp_min(0)
        return i, int(torch.multinomial(residual / residual.sum(), 1, generator=generator))
    return len(drafts), int(torch.multinomial(p[len(drafts)], 1, generator=generator))


def draft_probabilities(drafter: Eagle3Drafter, logits: torch.Tensor, vocab_size: int, temperature: float) -> torch.Tensor:
    """Drafter logits [T, Vd] -> probabilities [T, V] on the target vocabulary (zero outside the draft vocab)."""
    q = torch.zeros(logits.shape[0], vocab_size)
    q[:, drafter.draft_to_target(torch.arange(logits.shape[-1]))] = torch.softmax(logits.float() / temperature, dim=-1)
    return q


def draft_chain(
    drafter: Eagle3Drafter,
    cache: DrafterCache,
    logits: torch.Tensor,
    hidden: torch.Tensor,
    n: int,
    k: int,
    temperature: float,
    generator: torch.Generator | None,
    min_confidence: float,
    lookup: ContextLookup | None,
) -> tuple[list[int], list[torch.Tensor | None]]:
    """Up to k drafts after the round's first token (at position n), from the drafter's state after the catch-up
    (`logits`, `hidden`). Greedy: the lookup's token where it has one, unless the drafter is sure of another
    (`Proposal.vetoed_by`), else the drafter's; the chain ends where the drafter alone is unsure."""
    drafts: list[int] = []
    probs: list[torch.Tensor | None] = []
    for j in range(k):
        if j:
            logits, hidden = drafter(drafter.embed(torch.tensor([[drafts[-1]]])), hidden[:, -1:], torch.tensor([[n + j - 1]]), cache)
        confidence, guess = torch.softmax(logits[0, -1].float(), -1).max(-1)
        guess, confidence = int(drafter.draft_to_target(guess)), float(confidence)
        proposal = lookup.propose(drafts) if lookup is not None else None  # a lookup exists for greedy chains only
        q = None
        if proposal is not None and not proposal.vetoed_by(guess, confidence):
            guess = proposal.token
        elif j and confidence < min_confidence:
            break
        elif temperature > 0:
            q = draft_probabilities(drafter, logits[0, -1:], drafter.config.vocab_size, temperature)[0]
            guess = int(torch.multinomial(q, 1, generator=generator))
        drafts.append(guess)
        probs.append(q)
    return drafts, probs


def speculative_decode(
    model: torch.nn.Module,
    drafter: Eagle3Drafter,
    session: Session,
    first_token: int,
    k: int,
    temperature: float,
    stats: GenerationStats,
    cancelled: Callable[[], bool],
    generator: torch.Generator | None = None,
    min_confidence: float = 0.0,
    prompt_lookup: bool = False,
    phrases: PhraseMemory | None = None,
) -> Iterator[int]:
    """Yield tokens after `first_token` (already sampled, not yet in the cache) until the caller stops.

    The chain stops early (after at least one draft) once the drafter's top probability falls below
    `min_confidence`, so an unsure drafter costs fewer verified positions; the output is unchanged.
    With `prompt_lookup` (greedy only), a position whose last tokens occurred earlier in the context drafts
    what followed them there (`ContextLookup`) unless the drafter is sure of another token, and keeps the
    chain going; where the context has none, `phrases` may (the target's past replies, `models/phrases.py`).
    """
    token = first_token
    lookup = ContextLookup(session.ids + [token], phrases=phrases) if prompt_lookup and temperature <= 0 else None
    while not cancelled():
        n = len(session.ids)
        # catch the drafter up on verified positions: position p sees (embedding of token p+1, target features at p)
        start = session.draft_cache.length
        next_ids = torch.tensor([session.ids[start + 1 :] + [token]])  # [1, n - start]
        positions = torch.arange(start, n)[None]
        logits, hidden = drafter(drafter.embed(next_ids), session.aux[start:n][None], positions, session.draft_cache)
        drafts, probs = draft_chain(drafter, session.draft_cache, logits, hidden, n, k, temperature, generator, min_confidence, lookup)
        target_logits = session.forward(model, [token, *drafts])  # [len(drafts)+1, V]: verify all drafts at once
        accepted, token_next = accept_drafts(target_logits, drafts, torch.stack(probs) if temperature > 0 else None, temperature, generator)
        session.crop(n + 1 + accepted)  # roll back rejected drafts in the target...
        session.draft_cache.crop(n)  # ...and the drafter's self-fed positions
        stats.target_forwards += 1
        stats.drafted_tokens += len(drafts)
        stats.accepted_tokens += accepted
        if lookup is not None:
            lookup.extend([*drafts[:accepted], token_next])
        for t in [*drafts[:accepted], token_next]:
            yield t
        token = token_next
