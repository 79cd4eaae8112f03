"""Running an HTTP tool: POST the arguments as JSON within the tool's timeout; whatever goes wrong becomes an
`{"error": ...}` answer for the model, never an exception."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass

import httpx

from pipeline.tools import HttpTool

log = logging.getLogger(__name__)

MAX_ANSWER_BYTES = 16 * 1024  # a tool answer is read into the prompt: longer ones are refused


@dataclass(frozen=True)
class ToolAnswer:
    data: object  # the service's JSON answer, or {"error": ...}
    outcome: str  # ok | error | timeout (the metric's label)

    @property
    def content(self) -> str:
        """The tool message the model reads next."""
        return json.dumps(self.data, ensure_ascii=False)


def failed(outcome: str, why: str) -> ToolAnswer:
    return ToolAnswer({"error": why}, outcome)


async def post_json(tool: HttpTool, arguments: dict) -> ToolAnswer:
    """The tool's JSON answer to `arguments`, or an error answer saying what went wrong."""
    try:
        async with asyncio.timeout(tool.timeout_s):
            async with (
                httpx.AsyncClient(timeout=tool.timeout_s) as client,
                client.stream("POST", str(tool.url), json=arguments) as response,
            ):
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_ANSWER_BYTES:
                        return failed("error", f"the {tool.name} service answered more than {MAX_ANSWER_BYTES} bytes")
    except (TimeoutError, httpx.TimeoutException):
        return failed("timeout", f"the {tool.name} service did not answer within {tool.timeout_s:g} s")
    except httpx.HTTPError as e:
        log.warning("tool %s: %s failed: %r", tool.name, tool.url, e)
        return failed("error", f"the {tool.name} service could not be reached")
    if not response.is_success:
        return failed("error", f"the {tool.name} service answered HTTP {response.status_code}")
    try:
        answer = json.loads(body)
    except (ValueError, RecursionError):
        return failed("error", f"the {tool.name} service did not answer JSON")
    return ToolAnswer(answer, "ok")
