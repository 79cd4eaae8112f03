"""End of turn: the rules, their cues (Smart Turn on the audio, the turn LM on the words), the per-call Endpointer, and
the endpointing benchmark's set and judge."""

from __future__ import annotations

import asyncio
import json
import math
import wave

import numpy as np
import pytest

from bench import endpointing
from bench.endpointing_set import CONTINUED, PAUSE_MS, RATE, TRIM_FLOOR, Speaker, Utterance, build, from_recording, voices
from models import assets
from pipeline.endpointing import Endpointer
from pipeline.profile import TurnSettings
from pipeline.smart_turn import SmartTurn
from pipeline.turn_lm import FLOOR, TurnLM, words_only
from pipeline.turn_models import TurnModels
from pipeline.turns import DETECTORS, Cues, EndpointRule
from pipeline.vad import SpeechDetector


@pytest.fixture(scope="module")
def smart_turn() -> SmartTurn:
    return SmartTurn()


@pytest.fixture(scope="module")
def turn_lm() -> TurnLM:
    return TurnLM()


def test_rules_wait_long_until_their_cues_say_the_caller_is_done():
    finished = Cues("What time do you open tomorrow?", 0.9, -0.05)
    trailing = Cues("My booking code is", 0.1, -3.5)
    assert EndpointRule("vad", silence_ms=600).wait_ms(finished) == 600
    assert EndpointRule("text").wait_ms(finished) == 250 and EndpointRule("text").wait_ms(trailing) == 700
    for detector in ("smart_turn", "turn_lm", "combined", "combined_audio"):
        rule = EndpointRule(detector)
        assert rule.wait_ms(Cues()) == rule.incomplete_ms  # nothing known yet: the patient wait
        assert rule.wait_ms(finished) == rule.complete_ms and rule.wait_ms(trailing) == rule.incomplete_ms
    combined = EndpointRule("combined")
    assert combined.wait_ms(Cues("What time do you open tomorrow?", 0.9)) == combined.incomplete_ms  # the LM not in yet
    assert EndpointRule("combined_audio").wait_ms(Cues("What time do you open tomorrow?", None, -0.05)) == 1200  # no audio cue
    assert not combined.reads_audio and EndpointRule("combined_audio").reads_audio
    # finished-looking words carry a lower LM score over the threshold; the same score alone does not
    assert combined.wait_ms(Cues("I want to book a cleaning.", 0.2, -1.0)) == 250
    assert combined.wait_ms(Cues("I want to book a cleaning for", 0.2, -1.0)) == 1200
    assert EndpointRule("turn_lm").wait_ms(Cues("I want to book a cleaning for", 0.2, -1.0)) == 250
    # finished-looking words the turn LM doubts (Whisper garbled them) wait as the text rule waits for unfinished ones
    garbled = Cues("How much does it cost to care come ag?", 0.2, -2.5)
    assert combined.wait_ms(garbled) == combined.silence_ms == 700
    assert EndpointRule("combined", silence_ms=1500).wait_ms(garbled) == 1200  # never beyond the unfinished wait


def test_every_detector_has_a_curve_and_the_profile_builds_its_rule():
    for detector in DETECTORS:
        rule = EndpointRule(detector)
        knobs = rule.sweep()
        assert len(knobs) >= 5 and rule.describe()
        assert {rule.with_knob(k) for k in knobs}.__len__() == len(knobs)  # each knob is a different rule
    settings = TurnSettings(detector="smart_turn", endpoint_complete_ms=300, endpoint_incomplete_ms=1500)
    rule = settings.endpoint_rule()
    assert (rule.detector, rule.complete_ms, rule.incomplete_ms, rule.silence_ms) == ("smart_turn", 300, 1500, 500)
    assert TurnSettings().detector == "turn_lm"


def test_smart_turn_reads_whisper_features_and_hears_a_finished_question(smart_turn, speech):
    from transformers import WhisperFeatureExtractor

    question = np.concatenate([speech("What time do you open tomorrow?"), np.zeros(3200, np.float32)])
    reference = WhisperFeatureExtractor(feature_size=80, chunk_length=8)(
        np.pad(question, (8 * RATE - len(question), 0)), sampling_rate=RATE, return_tensors="np", do_normalize=True
    ).input_features
    assert np.abs(smart_turn.input_features(question) - reference).max() < 1e-3
    assert smart_turn.probability(question) > 0.5
    assert 0.0 <= smart_turn.probability(np.zeros(RATE, np.float32)) <= 1.0
    assert "pipecat-ai" in str(assets.MissingModelError("Smart Turn v3.2", "pipecat-ai")) and "--no-deps" in str(
        assets.MissingModelError("Smart Turn v3.2", "pipecat-ai")
    )


def test_the_turn_lm_scores_finished_words_above_unfinished_ones(turn_lm):
    assert words_only("Hi, I'd like... to BOOK.") == "hi i'd like to book"
    assert turn_lm.log10_done("") == FLOOR
    done = turn_lm.log10_done("How much will it cost to bring my bike?")
    for unfinished in ("How much will it cost to bring", "My booking code is", "I'd like to change the"):
        assert turn_lm.log10_done(unfinished) < done, unfinished


def test_the_turn_lm_reads_the_words_alone_and_its_threshold_splits_them(turn_lm):
    assert turn_lm.log10_done("My booking code is") == turn_lm.log10_done("MY BOOKING, code is...")
    assert turn_lm.log10_done("Can I bring my dog?") > EndpointRule("turn_lm").lm_threshold > turn_lm.log10_done("I'd like to, um")
    assert FLOOR <= turn_lm.log10_done("um") <= 0.0


@pytest.mark.asyncio
async def test_the_endpointer_sets_the_vad_wait_as_each_cue_arrives(stages, smart_turn, turn_lm, speech):
    detector = SpeechDetector(stages.vad, endpoint_silence_ms=500)
    endpointer = Endpointer(EndpointRule("combined_audio"), detector, TurnModels(smart_turn, turn_lm))
    question = np.concatenate([speech("How much will it cost to bring my bike?"), np.zeros(1600, np.float32)])
    endpointer.pause(question)
    assert detector.endpoint_samples == 1200 * RATE // 1000  # nothing known: the patient wait
    endpointer.heard("How much will it cost to bring my bike?")
    for _ in range(200):
        if endpointer.cues.p_audio is not None and endpointer.cues.lm_log10 is not None:
            break
        await asyncio.sleep(0.02)
    assert detector.endpoint_samples == 250 * RATE // 1000
    endpointer.pause(question[: len(question) // 2])  # a new pause starts from nothing known
    assert endpointer.cues == Cues() and detector.endpoint_samples == 1200 * RATE // 1000
    endpointer.heard("How much will it cost to")
    await asyncio.sleep(0.5)
    assert detector.endpoint_samples == 1200 * RATE // 1000
    endpointer.cancel()

    bare = Endpointer(EndpointRule("combined_audio"), SpeechDetector(stages.vad), TurnModels())  # models missing: never hasty
    bare.pause(question)
    bare.heard("How much will it cost to bring my bike?")
    await asyncio.sleep(0.1)
    assert bare.detector.endpoint_samples == 1200 * RATE // 1000


def test_turn_models_load_only_for_the_rules_that_read_them():
    models = TurnModels()
    assert models.needed([EndpointRule("text"), EndpointRule("vad")]) == []
    assert models.needed([EndpointRule("combined")]) == [models.turn_lm]
    assert models.needed([EndpointRule("text"), EndpointRule("smart_turn")]) == [models.smart_turn]
    models.request(EndpointRule("text"))
    assert models.smart_turn.model is None and models.turn_lm.model is None
    models.request(EndpointRule("combined"))  # a call whose profile needs the turn LM: loaded in the background
    models.request(EndpointRule("combined"))
    assert isinstance(models.turn_lm.wait(60), TurnLM) and models.smart_turn.model is None


def test_the_set_puts_silence_where_the_labels_say_and_has_enough_pauses():
    assert sum(line.count("|") for line in CONTINUED) * len(voices()) >= 300 or len(voices()) == 3  # espeak-ng missing: Piper only
    speaker = Speaker()
    for voice in voices()[:: max(len(voices()) // 2, 1)]:
        for line in ("My phone number is | four one five, | five five five.", "I'd like to, um, | change the date."):
            parts = [p.strip() for p in line.split("|")]
            gaps = [900.0] * (len(parts) - 1)
            audio, pauses = speaker.say(voice, parts, gaps)
            assert len(pauses) == len(gaps)
            for a, b in pauses:
                assert b - a >= 0.9 * RATE - 1
                assert np.abs(audio[a + 160 : b - 160]).max() <= TRIM_FLOOR, (voice.name, line)
                assert np.abs(audio[max(a - 3200, 0) : a]).max() > 0.05 and np.abs(audio[b : b + 3200]).max() > 0.05
    utterances = build(seed=7, speaker=speaker, lines=2)
    assert build(seed=7, speaker=speaker, lines=2)[0].audio.tobytes() == utterances[0].audio.tobytes()  # reproducible
    for u in utterances:
        assert all(PAUSE_MS[0] * RATE / 1000 <= b - a <= PAUSE_MS[1] * RATE / 1000 + 0.3 * RATE for a, b in u.pauses)
        assert u.speech_end < len(u.audio) - 2 * RATE


def test_a_recording_is_labelled_at_its_silences(tmp_path):
    tone = 0.3 * np.sin(2 * np.pi * 200 * np.arange(RATE) / RATE)
    audio = np.concatenate([np.zeros(4000), tone, np.zeros(8000), tone, np.zeros(4000)])
    path = tmp_path / "turn.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(RATE)
        w.writeframes((audio * 32767).astype("<i2").tobytes())
    u = from_recording(path)
    assert len(u.pauses) == 1 and abs((u.pauses[0][1] - u.pauses[0][0]) - 8000) <= 320
    assert abs(u.speech_end - u.pauses[0][1] - RATE) <= 320


def pause(event: int, start: int, silence_ms: float, text: str = "", lm: float = -9.0) -> endpointing.Pause:
    return endpointing.Pause("u", event, start, silence_ms, text, 80.0, 0.2, 40.0, lm, 50.0)


def test_the_judge_counts_cut_offs_and_the_wait_after_the_last_word():
    u = Utterance("u", "v", "I am a member, | K 7.", np.zeros(5 * RATE, np.float32), [(RATE, RATE + 9600)], 2 * RATE)
    pauses = [pause(0, RATE, 600.0, "I am a member."), pause(-1, 2 * RATE + 1600, math.inf, "I am a member, K7.", -4.0)]
    hasty, patient = EndpointRule("text"), EndpointRule("vad", silence_ms=800)
    cut, done = endpointing.judge(hasty, u, pauses)
    assert cut.label == "continues" and cut.cut_off and done.label == "done" and not done.cut_off
    assert done.wait_ms == pytest.approx(100 + 256, abs=1)  # VAD lag, then 250 ms rounded up to whole 32 ms chunks
    cut, done = endpointing.judge(patient, u, pauses)
    assert not cut.cut_off and done.wait_ms == pytest.approx(100 + 800, abs=1)
    slow = [pause(0, RATE, 600.0, "My code is."), pause(-1, 2 * RATE, math.inf, "Yes.")]
    slow[1].asr_ms = 400.0  # a decision due later than the rule's wait ends the turn when it arrives
    assert endpointing.judge(hasty, u, slow)[1].wait_ms == pytest.approx(416, abs=1)


def test_the_benchmark_writes_its_report_csvs_and_plot(tmp_path):
    report = endpointing.run(tmp_path, seed=3, lines=1)
    assert set(report["rules"]) == set(DETECTORS)
    for name, r in report["rules"].items():
        assert 0.0 <= r["false_cut_offs"] <= 1.0 and r["done"] == len(voices()) * 2
        assert report["curves"][name] and "knob" in report["curves"][name][0]
    assert json.loads((tmp_path / "report.json").read_text())["seed"] == 3
    assert (tmp_path / "events.csv").read_text().startswith("rule,utterance,event,label")
    assert "lm_log10" in (tmp_path / "pauses.csv").read_text().splitlines()[0]
    assert (tmp_path / "curve.png").read_bytes()[:4] == b"\x89PNG"
    assert "combined" in endpointing.table(report)


def test_train_turn_lm_learns_from_whole_and_cut_caller_turns_and_ships_what_the_model_loads(tmp_path):
    import random

    from training.data.realistic.callers import caller_pool
    from training.data.realistic.pools import load_pools
    from training.turn_lm import TurnLMTrainConfig, area_under_roc, example, train

    rng, pool = random.Random(0), load_pools("train")[0]
    drawn = [example(rng, pool, caller_pool("train"), 0.5) for _ in range(200)]
    assert {label for _, label in drawn} == {0, 1} and all(text == words_only(text) and text for text, _ in drawn)
    assert area_under_roc(np.array([0.1, 0.9, 0.5, 0.5]), np.array([0, 1, 0, 1])) == 0.875
    record = train(TurnLMTrainConfig(out=tmp_path, steps=2, batch_size=4, validation_sectors=1, validation_examples=20))
    assert [row["step"] for row in record["history"]] == [0, 2] and len(record["validation_sectors"]) == 1
    trained = TurnLM(tmp_path / "minilm_turn.safetensors")
    assert trained.log10_done("Can I bring my dog?") != TurnLM().log10_done("Can I bring my dog?")
    with pytest.raises(FileNotFoundError, match="talkline train turn-lm"):
        TurnLM(tmp_path / "missing.safetensors")
