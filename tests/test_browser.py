"""The demo page at / in headless Chromium: spoken calls through a fake microphone over WebRTC (the default) and over the
WebSocket, a barge-in over WebRTC, a typed call without a microphone, and the capture worklet's resampler."""

from __future__ import annotations

import os
import shutil
import subprocess
import wave
from pathlib import Path

import numpy as np
import pytest
from servers import serving

from pipeline.audio import float_to_pcm16

async_api = pytest.importorskip("playwright.async_api", reason="playwright is in the dev extra: pip install -e '.[dev]'")

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts"
QUESTION = "What is the fee for a checked bag?"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
]


@pytest.fixture(scope="module")
def chromium() -> Path:
    """Debian's Chromium (`make test` installs it); installed here when missing and we are root, else skipped."""
    if not CHROMIUM.exists() and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run("apt-get update -qq && apt-get install -y -qq chromium", shell=True, env=env, capture_output=True, timeout=900)
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing and could not be installed: run `apt-get install chromium` as root")
    return CHROMIUM


def write_wav(path: Path, samples: np.ndarray, rate: int) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(float_to_pcm16(samples))
    return path


@pytest.fixture(scope="module")
def question_wav(speech, tmp_path_factory) -> Path:
    """The caller's microphone at 48 kHz: silence while the greeting plays, the question, silence for the endpoint.
    Played once (`%noloop` on the flag): a looping file would ask again and barge in on the answer."""
    question = speech(QUESTION, 48000)
    audio = np.concatenate([np.zeros(48000 * 5, np.float32), question, np.zeros(48000 * 2, np.float32)])
    return write_wav(tmp_path_factory.mktemp("mic") / "question.wav", audio, 48000)


@pytest.fixture(scope="module")
def barge_in_wav(speech, tmp_path_factory) -> Path:
    """A question whose answer takes ~4 s to speak, then 2.5 s on (the agent is answering) the caller speaks over it."""
    first = speech("How much does it cost to change my flight?", 48000)
    second = speech("Sorry, one more thing, can I bring my dog on board?", 48000)
    parts = [np.zeros(48000 * 5, np.float32), first, np.zeros(120000, np.float32), second, np.zeros(96000, np.float32)]
    return write_wav(tmp_path_factory.mktemp("mic") / "barge-in.wav", np.concatenate(parts), 48000)


class DemoPage:
    """The demo page in one browser; records every request and page error."""

    def __init__(self, server, page) -> None:
        self.server, self.page = server, page
        self.requests: list[str] = []
        self.errors: list[str] = []
        page.on("request", lambda r: self.requests.append(r.url))
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    async def value(self, expression: str, arg=None):
        return await self.page.evaluate(expression, arg)

    async def until(self, expression: str, timeout_s: float = 60) -> None:
        await self.page.wait_for_function(expression, timeout=timeout_s * 1000)

    async def start_call(self, brand: str, transport: str = "webrtc") -> None:
        await self.page.goto(self.server.url + "/")
        await self.page.get_by_role("radio", name=brand).click()
        assert await self.page.inner_text("#brand-name") == brand
        assert await self.page.input_value("#transport") == "webrtc", "WebRTC is the page's default"
        await self.page.select_option("#transport", transport)
        await self.page.click("#call-button")

    def assert_clean(self) -> None:
        """No script errors, and nothing fetched from anywhere but the Talkline server."""
        assert not self.errors, self.errors
        foreign = [u for u in self.requests if not u.startswith((self.server.url, self.server.ws_url))]
        assert not foreign, foreign


@pytest.fixture
async def browser(chromium, server, tmp_path):
    """open(*flags) -> DemoPage, a browser with a fresh profile directory."""
    async with async_api.async_playwright() as p:
        contexts = []

        async def open_page(*flags: str) -> DemoPage:
            context = await p.chromium.launch_persistent_context(
                tmp_path / "profile",
                executable_path=str(chromium),
                args=FLAGS + list(flags),
                viewport={"width": 1280, "height": 860},
                bypass_csp=True,  # Playwright's wait_for_function evaluates strings; DemoPage.assert_clean checks requests instead
            )
            contexts.append(context)
            return DemoPage(server, await context.new_page())

        yield open_page
        for context in contexts:
            await context.close()


async def assert_reply_audio(page: DemoPage, played_before: int) -> None:
    """The worklet plays more than 8000 agent samples after `played_before`, and the count keeps growing."""
    await page.until(f"window.talkline.playedSamples > {played_before + 8000}", 60)
    played = await page.value("window.talkline.playedSamples")
    await page.until(f"window.talkline.playedSamples > {played}", 5)


async def assert_latency_row(page: DemoPage, asr: bool) -> list[str]:
    await page.page.wait_for_selector("#latency tbody tr", timeout=90_000)
    cells = await page.page.locator("#latency tbody tr").first.locator("td").all_inner_texts()
    assert cells[0] == "1"
    assert (cells[1] != "—") == asr, cells
    assert all(float(c.replace(",", "")) > 0 for c in cells[2:]), cells
    return cells


def fake_microphone(wav: Path) -> list[str]:
    return ["--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream", f"--use-file-for-fake-audio-capture={wav}%noloop"]


@pytest.mark.parametrize("transport", ["webrtc", "websocket"])
async def test_spoken_call_in_the_browser(browser, question_wav, transport):
    page = await browser(*fake_microphone(question_wav))
    await page.start_call("Skyways Air", transport)
    await page.until("window.talkline.callId !== null", 30)

    heard = page.page.locator(".bubble.caller:not(.interim)", has_text="bag")
    await heard.wait_for(timeout=60_000)
    played_before = await page.value("window.talkline.playedSamples")
    reply = page.page.locator(".bubble.caller:not(.interim) + .bubble.agent")
    await reply.wait_for(timeout=60_000)
    await assert_reply_audio(page, played_before)
    assert (await reply.inner_text()).strip()
    await assert_latency_row(page, asr=True)
    assert "Microphone on" in await page.page.inner_text("#mic-note")

    assert transport.replace("webrtc", "WebRTC").replace("websocket", "WebSocket") in await page.page.inner_text("#mic-note")

    ARTIFACTS.mkdir(exist_ok=True)
    await page.page.screenshot(path=ARTIFACTS / f"browser-call-{transport}.png")
    await page.page.click("#call-button")
    await page.until("window.talkline.state === 'idle'", 10)
    assert await page.page.inner_text("#notice-text") == "Call ended."
    page.assert_clean()


async def test_barge_in_over_webrtc(browser, barge_in_wav):
    """The caller speaks over the reply: the agent stops, its bubble shows what was heard, the new question is answered."""
    page = await browser(*fake_microphone(barge_in_wav))
    await page.start_call("Skyways Air")
    await page.page.locator(".bubble.agent.interrupted").wait_for(timeout=90_000)
    await page.page.locator(".bubble.caller:not(.interim)", has_text="dog").wait_for(timeout=60_000)
    await page.page.locator(".bubble.caller:not(.interim) + .bubble.agent:not(.streaming)").last.wait_for(timeout=60_000)
    page.assert_clean()


async def test_typed_turn_without_a_microphone(browser):
    page = await browser("--use-fake-device-for-media-stream", "--deny-permission-prompts")
    await page.start_call("Skyways Air")
    await page.until("window.talkline.state === 'listening'", 60)  # the greeting has been spoken
    assert "denied" in await page.page.inner_text("#notice-text")

    played_before = await page.value("window.talkline.playedSamples")
    await page.page.fill("#text-input", "How much does a checked bag cost?")
    await page.page.press("#text-input", "Enter")
    await page.page.locator(".bubble.caller.typed", has_text="checked bag").wait_for(timeout=5000)
    reply = page.page.locator(".bubble.caller.typed + .bubble.agent")
    await reply.wait_for(timeout=60_000)
    await assert_reply_audio(page, played_before)
    await assert_latency_row(page, asr=False)
    assert (await reply.inner_text()).strip()
    ARTIFACTS.mkdir(exist_ok=True)
    await page.page.screenshot(path=ARTIFACTS / "browser-typed.png")
    page.assert_clean()


async def test_api_key_field_unlocks_a_keyed_server(browser, stages, tmp_path):
    """With TALKLINE_API_KEYS the page asks for a key, keeps it in localStorage and calls with ?token=."""
    with serving(stages, tmp_path, api_keys=["page-key-7f3a"]) as keyed:
        page = await browser("--use-fake-device-for-media-stream", "--deny-permission-prompts")
        page.server = keyed
        await page.page.goto(keyed.url + "/")
        await page.page.locator("#notice-text", has_text="needs an API key").wait_for(timeout=10_000)
        await page.page.fill("#token", "page-key-7f3a")
        await page.page.press("#token", "Tab")  # commits the field: the page reloads the profiles with the key
        await page.page.get_by_role("radio", name="Skyways Air").wait_for(timeout=10_000)
        await page.start_call("Skyways Air")  # a fresh load: the key comes back from localStorage
        assert await page.page.input_value("#token") == "page-key-7f3a"
        await page.until("window.talkline.callId !== null", 30)
        await page.page.click("#call-button")
        await page.until("window.talkline.state === 'idle'", 10)
        page.assert_clean()


CAPTURE_TONE = """async ([rate, frequency]) => {
  const ctx = new OfflineAudioContext(1, rate, rate);
  await ctx.audioWorklet.addModule("/static/capture.worklet.js");
  const capture = new AudioWorkletNode(ctx, "talkline-capture", {
    numberOfInputs: 1, numberOfOutputs: 0, channelCount: 1, channelCountMode: "explicit",
  });
  const frames = [];
  capture.port.onmessage = ({ data }) => frames.push(Array.from(new Int16Array(data.pcm)));
  const tone = new OscillatorNode(ctx, { frequency });
  tone.connect(new GainNode(ctx, { gain: 0.5 })).connect(capture);
  tone.start();
  await ctx.startRendering();
  await new Promise((resolve) => setTimeout(resolve, 300));  // the last port messages
  return frames;
}"""


@pytest.mark.parametrize("rate", [44100, 48000])
async def test_capture_worklet_resamples_to_16k(browser, rate):
    """One second of a tone at the context rate -> fifty 20 ms frames at 16 kHz; 1 kHz kept, 11 kHz filtered out."""
    page = await browser()
    await page.page.goto(page.server.url + "/")
    for frequency, expected_rms in ((1000, 0.5 / np.sqrt(2)), (11000, 0.0)):
        frames = await page.value(CAPTURE_TONE, [rate, frequency])
        assert len(frames) == 50 and {len(f) for f in frames} == {320}
        x = np.array(frames[1:], np.float64).ravel() / 32767  # the first frame holds the filter's warm-up
        assert abs(np.sqrt(np.mean(x**2)) - expected_rms) < 0.005, (frequency, np.sqrt(np.mean(x**2)))
        if expected_rms:
            peak_hz = np.argmax(np.abs(np.fft.rfft(x * np.hanning(len(x))))) * 16000 / len(x)
            assert abs(peak_hz - frequency) < 20
