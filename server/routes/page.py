"""GET / (the browser demo page) and its static files under /static."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).resolve().parent.parent / "static"

# Everything the page loads comes from this server; the policy makes a stray external request fail loudly.
POLICY = "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; object-src 'none'; base-uri 'none'"

router = APIRouter()
router.mount("/static", StaticFiles(directory=STATIC), name="static")


@router.get("/", include_in_schema=False)
def index() -> FileResponse:
    return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache", "Content-Security-Policy": POLICY})
