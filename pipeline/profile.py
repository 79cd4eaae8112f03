"""Agent profiles: one brand's persona, facts, voice, LLM and turn settings, validated at load."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from models.assets import PIPER_VOICES
from pipeline.tools import Tool, ToolCall, ToolCallError, TransferTool, parameters_of, validate_arguments
from pipeline.turns import EndpointRule

DEFAULT_PROFILES = Path(__file__).resolve().parent.parent / "profiles"  # the example profiles in the repository
PROFILE_ID_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
DtmfKey = Annotated[str, Field(pattern=r"^[0-9*#]$")]


class ProfileError(ValueError):
    """A profile file is invalid; the message names the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class VoiceSettings(_Strict):
    voice: str = Field("en_US-joe-medium", description="a Piper voice the server bundles (models/assets.PIPER_VOICES)")
    length_scale: float = Field(1.0, ge=0.5, le=2.0, description="< 1 speaks faster")
    noise_scale: float | None = Field(None, ge=0.0, le=2.0)
    noise_w_scale: float | None = Field(None, ge=0.0, le=2.0)
    volume: float = Field(1.0, gt=0.0, le=4.0)

    @field_validator("voice")
    @classmethod
    def _bundled(cls, name: str) -> str:
        if name not in PIPER_VOICES:
            raise ValueError(f"no voice '{name}' on this server; use one of: {', '.join(PIPER_VOICES)}")
        return name


class LLMSettings(_Strict):
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(64, ge=1, le=1024)
    history_turns: int = Field(8, ge=1, le=64, description="caller/agent exchanges kept in the prompt")
    retrieved_facts: int = Field(
        3, ge=0, le=10, description="facts or policies placed before each caller question, best first; 0 = off (facts in system prompt)"
    )
    split_questions: bool = Field(True, description="a turn of two questions about different facts is answered one question at a time")
    warm_facts: bool = Field(
        True, description="while the caller speaks, the facts ranked for their words so far are prefilled, so the turn feeds only its words"
    )
    read_out_facts: bool = Field(
        True, description="when the model declines a question whose closest fact is close to the caller's words, the caller hears that fact"
    )


class TurnSettings(_Strict):
    detector: Literal["turn_lm", "text", "combined", "combined_audio", "smart_turn", "vad"] = Field(
        "turn_lm", description="what judges a pause: see docs/turn-taking.md (turn_lm: half the transcript rule's cut-offs)"
    )
    endpoint_silence_ms: int = Field(
        500, ge=100, le=5000, description="text: a turn that trails off; combined: finished words the turn LM doubts; vad: every turn"
    )
    endpoint_complete_ms: int = Field(250, ge=100, le=5000, description="silence that ends a turn judged finished")
    endpoint_incomplete_ms: int = Field(1200, ge=100, le=5000, description="silence that ends a turn a model judges unfinished")
    barge_in_min_ms: int = Field(300, ge=50, le=5000)
    vad_threshold: float = Field(0.5, gt=0.0, lt=1.0)
    interim_interval_ms: int = Field(700, ge=200, le=10000)
    first_clause_words: int = Field(1, ge=1, le=20, description="words before a comma may end a reply's first clause")

    clause_lookahead_ms: int = Field(
        600, ge=0, le=5000, description="queued agent audio below which a clause is cut at a word boundary; 0 = never"
    )
    barge_in_reads_words: bool = Field(
        True, description="a caller sound over the agent is read first: a backchannel goes unheeded, one with no words only pauses it"
    )

    def endpoint_rule(self) -> EndpointRule:
        return EndpointRule(self.detector, self.endpoint_complete_ms, self.endpoint_silence_ms, self.endpoint_incomplete_ms)


class Escalation(_Strict):
    target: str = Field(..., min_length=1, description="phone number or SIP URI of the human team")
    description: str = "a human agent"


class DtmfTool(_Strict):
    """A keypad digit that runs a tool directly, e.g. 0 = transfer_to_human."""

    tool: str = Field(..., min_length=1)
    arguments: dict = {}


class Profile(_Strict):
    id: str = Field(..., pattern=PROFILE_ID_PATTERN)
    brand: str = Field(..., min_length=1)
    sector: str = ""
    persona: str = Field(..., min_length=1)
    greeting: str = Field(..., min_length=1)
    facts: list[str] = []
    policies: list[str] = []
    fallback_line: str = "Sorry, I'm having trouble right now. Could you say that again?"
    closing_line: str = Field(
        "I'm sorry, I have to end this call now. Please call us back in a moment. Goodbye.",
        min_length=1,
        description="said when the server ends a call itself (a restart's drain ran out of time)",
    )
    voice: VoiceSettings = VoiceSettings()
    llm: LLMSettings = LLMSettings()
    turn: TurnSettings = TurnSettings()
    escalation: Escalation | None = None
    tools: list[Tool] = []
    dtmf: dict[DtmfKey, Annotated[str, Field(min_length=1)] | DtmfTool] = Field(
        {}, description="keypad digit -> what the caller means, or {tool: NAME} to run a tool"
    )

    def keypress(self, digit: str) -> tuple[str, ToolCall | None]:
        """What a keypad digit says to the agent, and the tool it runs without the model (None: the model answers)."""
        pressed = f"The caller pressed {digit}."
        action = self.dtmf.get(digit, pressed)
        if isinstance(action, DtmfTool):
            return pressed, ToolCall(action.tool, action.arguments)
        return action, None

    @field_validator("dtmf", mode="before")
    @classmethod
    def _digits_as_text(cls, value: object) -> object:
        """YAML reads an unquoted `1:` key as a number."""
        return {str(k): v for k, v in value.items()} if isinstance(value, dict) else value

    @model_validator(mode="after")
    def _tools_resolve(self) -> Profile:
        names = [t.name for t in self.tools]
        if len(names) != len(set(names)):
            raise ValueError(f"tools: each name once, got {names}")
        if any(isinstance(t, TransferTool) and not t.target for t in self.tools) and not self.escalation:
            raise ValueError("tools: transfer_to_human needs a target, or an escalation section")
        for digit, action in self.dtmf.items():
            if not isinstance(action, DtmfTool):
                continue
            if action.tool not in names:
                raise ValueError(f"dtmf.{digit}: tool '{action.tool}' is not declared in tools")
            try:
                validate_arguments(parameters_of(self.tool(action.tool)), action.arguments)
            except ToolCallError as e:
                raise ValueError(f"dtmf.{digit}: {e}") from None
        return self

    def tool(self, name: str):
        """The declared tool called `name`, or None."""
        return next((t for t in self.tools if t.name == name), None)

    def transfer_target(self) -> str | None:
        """Where transfer_to_human sends the caller: the tool's own target, else the escalation target."""
        tool = self.tool("transfer_to_human")
        return (tool.target if tool and tool.target else None) or (self.escalation.target if self.escalation else None)


def _union_tag(part: object) -> bool:
    """Pydantic names the union member an error came from in its location ('constrained-str', 'DtmfTool')."""
    members = {"str", "constrained-str", "DtmfTool", "TransferTool", "EndCallTool", "HttpTool"}
    return isinstance(part, str) and (part in members or ("[" in part and part != "[key]"))


def _describe(error: ValidationError) -> str:
    by_field: dict[str, list[str]] = {}
    for e in error.errors():
        field = ".".join(str(p) for p in e["loc"] if not _union_tag(p)) or "(top level)"
        by_field.setdefault(field, []).append(e["msg"])
    return "; ".join(f"field '{field}': {' or '.join(msgs)}" for field, msgs in by_field.items())


def parse_profile(data: object, source: str = "<profile>") -> Profile:
    """Validate one profile object; errors name the source and field."""
    try:
        return Profile.model_validate(data)
    except ValidationError as e:
        raise ProfileError(f"{source}: {_describe(e)}") from None


def load_profile_file(path: Path) -> Profile:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise ProfileError(f"{path}: not valid YAML: {e}") from None
    return parse_profile(data, str(path))


def load_profiles(directory: Path) -> dict[str, Profile]:
    """Every *.yaml / *.yml profile in a folder, keyed by id."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ProfileError(f"{directory}: profiles folder does not exist")
    profiles: dict[str, Profile] = {}
    for path in sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")]):
        profile = load_profile_file(path)
        if profile.id in profiles:
            raise ProfileError(f"{path}: field 'id': '{profile.id}' is already used by another profile")
        profiles[profile.id] = profile
    if not profiles:
        raise ProfileError(f"{directory}: no *.yaml profiles found")
    return profiles
