"""GET / (the browser demo page) and its static files under /static (public; headers from server/headers.py)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).resolve().parent.parent / "static"

router = APIRouter()
router.mount("/static", StaticFiles(directory=STATIC), name="static")  # StaticFiles refuses paths outside STATIC


@router.get("/", include_in_schema=False)
def index() -> FileResponse:
    return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})
