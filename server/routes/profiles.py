"""GET /profiles and /profiles/{id}."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request

router = APIRouter()


@router.get("/profiles")
def list_profiles(request: Request) -> list[dict]:
    return [
        {"id": p.id, "brand": p.brand, "sector": p.sector, "greeting": p.greeting}
        for p in request.app.state.talkline.profiles.values()
    ]


@router.get("/profiles/{profile_id}")
def get_profile(profile_id: str, request: Request) -> dict:
    profile = request.app.state.talkline.profiles.get(profile_id)
    if profile is None:
        raise HTTPException(404, f"no profile '{profile_id}'; GET /profiles lists them")
    return profile.model_dump()
