"""The tool-call text format: the strict parser, the speech filter that keeps markup from the caller, and the OpenAI
wire format both ways (history as `tool_calls`/`tool` messages, streamed `delta.tool_calls` back to our text)."""

from __future__ import annotations

import json

import pytest

from pipeline.openai_format import StreamedCalls, call_deltas, split_call, to_openai
from pipeline.profile import ProfileError, parse_profile
from pipeline.tools import EndCallTool, HttpTool, SpeechFilter, ToolCall, TransferTool, split_reply

LOOKUP = HttpTool(
    name="lookup_booking",
    description="Look up a booking by its code.",
    parameters={"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
    url="http://127.0.0.1:9/lookup",
)
TOOLS = [TransferTool(name="transfer_to_human"), EndCallTool(name="end_call"), LOOKUP]


def test_a_reply_splits_into_speech_and_one_call():
    reply = split_reply('Let me check. <tool_call>{"name": "lookup_booking", "arguments": {"code": "K7Q2ZP"}}</tool_call> ignored', TOOLS)
    assert (reply.speech, reply.call, reply.error) == ("Let me check.", ToolCall("lookup_booking", {"code": "K7Q2ZP"}), None)
    assert split_reply("Goodbye!", TOOLS).call is None
    assert split_reply('<tool_call>{"name": "end_call"}</tool_call>', TOOLS).call == ToolCall("end_call", {})


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('Okay. <tool_call>{"name": "end_call", "arguments": {}}', "not closed"),
        ("Okay. <tool_call>{name: end_call}</tool_call>", "not JSON"),
        ('Okay. <tool_call>{"name": "delete_account", "arguments": {}}</tool_call>', "not a declared tool"),
        ('Okay. <tool_call>{"name": "lookup_booking", "arguments": {"code": 5}}</tool_call>', "must be a string"),
        ('Okay. <tool_call>{"name": "lookup_booking", "arguments": {}}</tool_call>', "missing required"),
        ('Okay. <tool_call>{"name": "lookup_booking", "arguments": {"code": "A", "pin": "1"}}</tool_call>', "unknown argument"),
        ('Okay. <tool_call>{"name": "end_call", "arguments": []}</tool_call>', "JSON object"),
        ('Okay. <tool_call>{"name": "end_call", "arguments": {}, "id": 1}</tool_call>', "expected"),
    ],
)
def test_malformed_calls_are_rejected_with_the_speech_kept(text, error):
    reply = split_reply(text, TOOLS)
    assert reply.call is None and error in reply.error and reply.speech == "Okay."


def speakable(deltas: list[str]) -> tuple[list[str], SpeechFilter]:
    speech = SpeechFilter()
    out = [speech.feed(d) for d in deltas]
    return [*out, speech.flush()], speech


def test_speech_filter_holds_back_a_tag_until_it_is_sure():
    out, speech = speakable(["Sure, one ", "moment. <to", 'ol_call>{"name": ', '"end_call"}</tool_call>', " Bye"])
    assert "".join(out) == "Sure, one moment. " and out[1] == "moment. " and out[2:] == ["", "", "", ""]
    assert speech.text.endswith("</tool_call> Bye")
    out, _ = speakable(["a <", "to", "ast", " for you <"])
    assert out == ["a ", "", "<toast", " for you ", "<"], "a '<' that turns out not to be a tag is spoken after all"


def test_history_goes_out_as_openai_tool_calls():
    call = ToolCall("lookup_booking", {"code": "K7Q2ZP"})
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "My code is K7Q2ZP."},
        {"role": "assistant", "content": call.markup()},
        {"role": "tool", "content": '{"status": "confirmed"}'},
        {"role": "assistant", "content": "It is confirmed."},
        {"role": "user", "content": "Bye."},
        {"role": "assistant", "content": 'Goodbye. <tool_call>{"name": "end_call", "arguments": {}}</tool_call>'},
    ]
    out = to_openai(messages)
    assert out[:2] == messages[:2] and out[4:6] == messages[4:6]
    assert out[2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "lookup_booking", "arguments": '{"code": "K7Q2ZP"}'}}],
    }
    assert out[3] == {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "confirmed"}'}
    assert out[6]["content"] == "Goodbye." and out[6]["tool_calls"][0]["id"] == "call_2"


def test_streamed_tool_calls_become_our_text():
    calls = StreamedCalls()
    for delta in call_deltas(ToolCall("lookup_booking", {"code": "K7Q2ZP"})):
        calls.add(delta["tool_calls"])
    assert split_reply(calls.text(), TOOLS).call == ToolCall("lookup_booking", {"code": "K7Q2ZP"})

    broken = StreamedCalls()
    broken.add([{"index": 0, "id": "a", "function": {"name": "lookup_booking", "arguments": '{"code": '}}])
    assert split_reply(broken.text(), TOOLS).error.startswith("not JSON"), "arguments that are not JSON are never run"
    with pytest.raises((TypeError, AttributeError)):
        StreamedCalls().add([{"index": "0", "function": {"name": 5}}])


def test_our_server_reads_replies_as_sglang_does():
    text = 'Sure. <tool_call>{"name": "end_call", "arguments": {}}</tool_call>'
    assert split_call(text, {"end_call"}) == ("Sure. ", ToolCall("end_call", {}))
    assert split_call(text, {"transfer_to_human"}) == (text, None), "a call of a tool not in the request stays text"
    assert split_call("Sure. <tool_call>{oops}</tool_call>", {"end_call"})[1] is None


def test_dtmf_tool_arguments_are_checked_at_load():
    base = {"id": "p", "brand": "B", "persona": "P", "greeting": "Hi.", "escalation": {"target": "+15550100"}}
    tools = [{"name": "transfer_to_human"}, json.loads(LOOKUP.model_dump_json())]
    assert parse_profile({**base, "tools": tools, "dtmf": {"0": {"tool": "transfer_to_human"}, 1: "My booking."}})
    with pytest.raises(ProfileError, match="dtmf.2: argument 'code' must be a string"):
        parse_profile({**base, "tools": tools, "dtmf": {"2": {"tool": "lookup_booking", "arguments": {"code": 7}}}})
