"""Tool calls in the OpenAI chat format, both ways: our `<tool_call>` text <-> `tool_calls` and `tool` messages.

The sglang backend sends the history this way and turns streamed `delta.tool_calls` back into our text; `talkline
engine` does the reverse. Either way one strict parser (pipeline.tools.split_reply) reads every backend's reply.
"""

from __future__ import annotations

import json

from pipeline.tools import CLOSE, OPEN, ToolCall


def call_id(n: int) -> str:
    """The id of the conversation's n-th call: stable across turns, so the prompt prefix stays cacheable."""
    return f"call_{n}"


def parse_markup(payload: str) -> ToolCall | None:
    """The JSON between the tags as a ToolCall (any name, object arguments), or None when it is not one."""
    try:
        data = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not isinstance(data.get("arguments", {}), dict):
        return None
    return ToolCall(data["name"], data.get("arguments", {}))


def split_call(text: str, names: set[str]) -> tuple[str, ToolCall | None]:
    """A reply read as SGLang's tool parser reads it: the speech and the first well-formed call of a requested tool,
    else the whole text and no call."""
    head, tag, rest = text.partition(OPEN)
    payload, closed, _ = rest.partition(CLOSE)
    call = parse_markup(payload.strip()) if tag and closed else None
    if call is None or call.name not in names:
        return text, None
    return head, call


def openai_call(call: ToolCall, n: int) -> dict:
    return {"id": call_id(n), "type": "function", "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}


def to_openai(messages: list[dict]) -> list[dict]:
    """Chat messages with each assistant <tool_call> as `tool_calls` and each tool result tied to its call's id."""
    out, n = [], 0
    for message in messages:
        head, tag, rest = message["content"].partition(OPEN)
        call = parse_markup(rest.partition(CLOSE)[0].strip()) if tag and message["role"] == "assistant" else None
        if call is not None:
            n += 1
            out.append({"role": "assistant", "content": head.strip() or None, "tool_calls": [openai_call(call, n)]})
        elif message["role"] == "tool":
            out.append({"role": "tool", "tool_call_id": call_id(n), "content": message["content"]})
        else:
            out.append(message)
    return out


def call_markup(name: str, arguments: str) -> str:
    """One OpenAI function call (arguments as a JSON string) as our text; arguments that are not JSON stay as
    written, so the strict parser rejects the call."""
    try:
        return ToolCall(name, json.loads(arguments or "{}")).markup()
    except (ValueError, RecursionError):
        return f'{OPEN}{{"name": {json.dumps(name)}, "arguments": {arguments}}}{CLOSE}'


class StreamedCalls:
    """Collects streamed `delta.tool_calls` by index: the id and name come first, then pieces of the arguments
    (SGLang may repeat an id on every piece and send a null name after the first)."""

    def __init__(self) -> None:
        self.calls: dict[int, list[str]] = {}  # index -> [name, arguments so far]

    def add(self, fragments: list) -> None:
        """Raises TypeError for fragments not shaped like OpenAI's."""
        for fragment in fragments:
            function = fragment.get("function") or {}
            name, arguments = function.get("name"), function.get("arguments")
            index = fragment.get("index", 0)
            if not isinstance(index, int) or not isinstance(name or "", str) or not isinstance(arguments or "", str):
                raise TypeError(fragment)
            call = self.calls.setdefault(index, ["", ""])
            call[0] = call[0] or name or ""
            call[1] += arguments or ""

    def text(self) -> str:
        """The calls, in index order, as our <tool_call> text ("" when none came)."""
        return "".join(call_markup(*self.calls[i]) for i in sorted(self.calls))


def call_deltas(call: ToolCall, n: int = 1) -> list[dict]:
    """One call as streamed `delta`s: id, type and name with empty arguments, then the arguments in two pieces."""
    arguments = json.dumps(call.arguments)
    head = {"index": 0, "id": call_id(n), "type": "function", "function": {"name": call.name, "arguments": ""}}
    cut = len(arguments) // 2
    pieces = [{"index": 0, "function": {"arguments": part}} for part in (arguments[:cut], arguments[cut:])]
    return [{"tool_calls": [fragment]} for fragment in (head, *pieces)]
