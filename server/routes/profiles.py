"""GET /profiles and /profiles/{id}: API keys (or loopback) required, see server/security.py."""

from __future__ import annotations

import re

from fastapi import APIRouter, Depends, HTTPException, Request

from pipeline.profile import PROFILE_ID_PATTERN
from server.security import guard_client

router = APIRouter(dependencies=[Depends(guard_client)])


@router.get("/profiles")
def list_profiles(request: Request) -> list[dict]:
    return [
        {"id": p.id, "brand": p.brand, "sector": p.sector, "greeting": p.greeting} for p in request.app.state.talkline.profiles.values()
    ]


@router.get("/profiles/{profile_id}")
def get_profile(profile_id: str, request: Request) -> dict:
    """One profile from the loaded set (ids never reach the file system)."""
    profile = request.app.state.talkline.profiles.get(profile_id) if re.match(PROFILE_ID_PATTERN, profile_id) else None
    if profile is None:
        raise HTTPException(404, f"no profile '{profile_id[:64]}'; GET /profiles lists them")
    return profile.model_dump()
