"""Agent tools: what a profile declares, the one text format the model calls them in, and its strict parser.

A reply may end with one call: optional words to speak, then
    <tool_call>{"name": "lookup_booking", "arguments": {"code": "AB1234"}}</tool_call>
Anything that does not parse exactly (bad JSON, unknown tool, arguments off the schema) is never executed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, HttpUrl, Tag, field_validator

OPEN, CLOSE = "<tool_call>", "</tool_call>"
BUILTINS = ("transfer_to_human", "end_call")
TOOL_NAME = r"^[a-z][a-z0-9_]{0,47}$"
JSON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TransferTool(_Strict):
    """Hand the caller to people: the profile's escalation target unless `target` is set here."""

    name: Literal["transfer_to_human"]
    target: str | None = Field(None, min_length=1, description="phone number or SIP URI; default: escalation.target")
    description: str = ""


class EndCallTool(_Strict):
    name: Literal["end_call"]
    description: str = ""


class HttpTool(_Strict):
    """A tool the server runs by POSTing the arguments as JSON to `url`; the JSON answer goes back to the model."""

    name: str = Field(..., pattern=TOOL_NAME)
    description: str = Field(..., min_length=1)
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    url: HttpUrl
    timeout_s: float = Field(5.0, gt=0, le=60)
    filler: str = Field("One moment while I check that.", description="said while waiting for the answer")

    @field_validator("name")
    @classmethod
    def _not_builtin(cls, name: str) -> str:
        if name in BUILTINS:
            raise ValueError(f"'{name}' is a built-in tool: declare it without a url")
        return name

    @field_validator("parameters")
    @classmethod
    def _object_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        """Parameters are a JSON-schema object of flat string/integer/number/boolean properties."""
        if schema.get("type") != "object" or not isinstance(schema.get("properties", {}), dict):
            raise ValueError('parameters must be a JSON schema with "type": "object" and "properties"')
        for key, prop in schema.get("properties", {}).items():
            if not re.match(TOOL_NAME, key) or not isinstance(prop, dict) or prop.get("type") not in JSON_TYPES:
                raise ValueError(f"parameter '{key}' needs a type among {', '.join(JSON_TYPES)}")
        missing = set(schema.get("required", [])) - set(schema.get("properties", {}))
        if missing:
            raise ValueError(f"required parameters {sorted(missing)} are not in properties")
        return schema


def _tool_kind(value: object) -> str:
    name = value.get("name") if isinstance(value, dict) else getattr(value, "name", None)
    return {"transfer_to_human": "TransferTool", "end_call": "EndCallTool"}.get(name, "HttpTool")


Tool = Annotated[
    Annotated[TransferTool, Tag("TransferTool")] | Annotated[EndCallTool, Tag("EndCallTool")] | Annotated[HttpTool, Tag("HttpTool")],
    Discriminator(_tool_kind),
]


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def markup(self) -> str:
        """The call as the model writes it."""
        return f"{OPEN}{json.dumps({'name': self.name, 'arguments': self.arguments}, ensure_ascii=False)}{CLOSE}"


def parameters_of(tool: TransferTool | EndCallTool | HttpTool) -> dict[str, Any]:
    return tool.parameters if isinstance(tool, HttpTool) else {"type": "object", "properties": {}}


def describe(tool: TransferTool | EndCallTool | HttpTool, team: str) -> str:
    """One prompt line: name(arg: type, ...): what it does."""
    props = parameters_of(tool).get("properties", {})
    args = ", ".join(f"{k}: {v['type']}" for k, v in props.items())
    default = {"transfer_to_human": f"connect the caller to {team}", "end_call": "hang up once the caller is done"}
    what = tool.description or default.get(tool.name, "")
    return f"- {tool.name}({args}): {what}"


def prompt_lines(tools: list, team: str) -> list[str]:
    """The system prompt's tools section (empty without tools)."""
    if not tools:
        return []
    return [f'Tools: to use one, end your reply with {OPEN}{{"name": ..., "arguments": {{...}}}}{CLOSE}'] + [
        describe(t, team) for t in tools
    ]


class ToolCallError(ValueError):
    """The model wrote a tool call that does not match a declared tool; it is not executed."""


def validate_arguments(schema: dict[str, Any], arguments: object) -> dict[str, Any]:
    if not isinstance(arguments, dict):
        raise ToolCallError("arguments must be a JSON object")
    props = schema.get("properties", {})
    for key, value in arguments.items():
        if key not in props:
            raise ToolCallError(f"unknown argument '{key}'")
        kind = JSON_TYPES[props[key]["type"]]
        if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
            raise ToolCallError(f"argument '{key}' must be a {props[key]['type']}")
    missing = [k for k in schema.get("required", []) if k not in arguments]
    if missing:
        raise ToolCallError(f"missing required argument(s) {', '.join(missing)}")
    return arguments


def parse_call(payload: str, tools: list) -> ToolCall:
    """The JSON between the tags -> a ToolCall of a declared tool with schema-valid arguments."""
    try:
        data = json.loads(payload)
    except json.JSONDecodeError as e:
        raise ToolCallError(f"not JSON: {e.msg}") from None
    if not isinstance(data, dict) or set(data) - {"name", "arguments"} or not isinstance(data.get("name"), str):
        raise ToolCallError('expected {"name": ..., "arguments": {...}}')
    declared = {t.name: t for t in tools}
    if data["name"] not in declared:
        raise ToolCallError(f"'{data['name']}' is not a declared tool")
    return ToolCall(data["name"], validate_arguments(parameters_of(declared[data["name"]]), data.get("arguments", {})))


@dataclass
class Reply:
    """A finished reply split into what is spoken and the tool call (or why the call was rejected)."""

    speech: str
    call: ToolCall | None = None
    error: str | None = None


def split_reply(text: str, tools: list) -> Reply:
    """Speech before the first <tool_call>, and that call parsed strictly (text after it is dropped)."""
    head, tag, rest = text.partition(OPEN)
    if not tag:
        return Reply(text.strip())
    payload, closed, _ = rest.partition(CLOSE)
    if not closed:
        return Reply(head.strip(), error="tool call is not closed")
    try:
        return Reply(head.strip(), parse_call(payload.strip(), tools))
    except ToolCallError as e:
        return Reply(head.strip(), error=str(e))


class SpeechFilter:
    """Streams the speakable part of a reply: text deltas pass until a <tool_call> tag starts; the rest is kept."""

    def __init__(self) -> None:
        self.text = ""
        self._sent = 0
        self._stopped = False

    def feed(self, delta: str) -> str:
        """The new speakable text (a partial '<tool' is held back until it is clearly not a tag)."""
        self.text += delta
        if self._stopped:
            return ""
        start = self.text.find(OPEN, self._sent)
        if start >= 0:
            self._stopped = True
            return self._take(start)
        end = len(self.text)
        for k in range(min(len(OPEN) - 1, end - self._sent), 0, -1):
            if OPEN.startswith(self.text[end - k :]):
                end -= k
                break
        return self._take(end)

    @property
    def stopped(self) -> bool:
        """Whether a tool call's tag has started."""
        return self._stopped

    def flush(self) -> str:
        """The held-back tail once the stream ends without a tag."""
        return "" if self._stopped else self._take(len(self.text))

    def _take(self, end: int) -> str:
        out, self._sent = self.text[self._sent : end], max(end, self._sent)
        return out


def openai_tools(tools: list) -> list[dict]:
    """The profile's tools in the OpenAI `tools` request format (for the sglang backend)."""
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description or t.name, "parameters": parameters_of(t)}}
        for t in tools
    ]
