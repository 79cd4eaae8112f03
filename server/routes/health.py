"""GET /healthz and GET /metrics (Prometheus)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

router = APIRouter()


@router.get("/healthz")
async def healthz(request: Request, response: Response) -> dict:
    """200 `ok`; 503 `draining` after SIGTERM, so a load balancer sends new calls elsewhere."""
    state = request.app.state.talkline
    if state.calls.draining:
        response.status_code = 503
    return {
        "status": "draining" if state.calls.draining else "ok",
        "llm": state.stages.llm.name,
        "profiles": len(state.profiles),
        "active_calls": state.metrics.active(),
        "tasks": len(asyncio.all_tasks()),
    }


@router.get("/metrics")
def metrics(request: Request) -> Response:
    return Response(request.app.state.talkline.metrics.render(), media_type=CONTENT_TYPE_LATEST)
