"""POST /webrtc/offer: a call over a WebRTC peer connection (aiortc), no media server. The caller's Opus track feeds the
same Call as every transport; the agent speaks on an outbound track; a data channel carries the browser protocol's JSON
events and accepts its `text`, `dtmf` and `stop` messages."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time

from aiortc import RTCConfiguration, RTCDataChannel, RTCIceServer, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipeline.audio import resample
from pipeline.call import Call
from pipeline.io import AudioIn, DtmfIn, HangUp, TextIn
from pipeline.playout import Segment
from pipeline.profile import PROFILE_ID_PATTERN, Profile
from server.limits import ErrorLog, FrameRate, Verdict
from server.security import guard_client
from server.transports.browser import BrowserWire
from server.transports.webrtc_media import RATE, PacedTrack, frame_samples, hand_on_at_once
from server.transports.wire import Digit, Stopped, Text, WireError

log = logging.getLogger(__name__)
router = APIRouter()

TRANSPORT = "webrtc"
MAX_OFFER_BYTES = 64 * 1024  # a browser's offer with audio and a data channel is 3-6 KB
ANSWER_S = 10.0  # to apply the offer and gather our candidates
MEDIA_SILENT_S = 10.0  # a caller whose audio track stopped arriving this long has gone
BACKLOG = 256  # events kept for a data channel that has not opened yet


class OfferError(Exception):
    """Why an offer is refused: the HTTP status, a machine-readable code and what to do."""

    def __init__(self, status: int, code: str, message: str, headers: dict | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.headers = status, code, headers


class Offer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: str = Field(pattern="^offer$")
    sdp: str = Field(min_length=1)
    profile: str = Field(pattern=PROFILE_ID_PATTERN)


class PeerIO:
    """CallIO over a peer connection: audio into the agent track, events over the data channel (kept until it opens)."""

    output_rate = RATE
    confirms_playback = False  # what the caller heard is estimated from the pacing, as for a page

    def __init__(self, track: PacedTrack) -> None:
        self.track = track
        self.channel: RTCDataChannel | None = None
        self.backlog: list[str] = []

    def attach(self, channel: RTCDataChannel) -> None:
        self.channel = channel
        channel.on("open", self._flush)
        if channel.readyState == "open":
            self._flush()

    def _flush(self) -> None:
        backlog, self.backlog = self.backlog, []
        for text in backlog:
            self._send(text)

    def _send(self, text: str) -> None:
        if self.channel is None or self.channel.readyState == "connecting":
            if len(self.backlog) < BACKLOG:
                self.backlog.append(text)
        elif self.channel.readyState == "open":
            with contextlib.suppress(Exception):  # the far end is gone: dropped, as on a closed socket
                self.channel.send(text)

    async def send_event(self, event: dict) -> None:
        self._send(json.dumps(event))

    async def send_audio(self, pcm16: bytes) -> None:
        self.track.push(pcm16)

    async def clear_audio(self) -> None:
        self.track.flush()
        await self.send_event({"type": "interrupt"})

    async def segment_sent(self, segment: Segment) -> None:
        return None

    async def transfer(self, target: str) -> None:
        """A page cannot dial: it is shown the hand-over, and the call ends."""
        await self.send_event({"type": "transfer", "target": target})

    async def hang_up(self) -> None:
        return None  # the call ends; PeerCall sends `end` and closes the connection

    async def end(self, reason: str, flush_s: float = 1.0) -> None:
        """The `end` event, given up to `flush_s` to leave before the connection closes."""
        await self.send_event({"type": "end", "reason": reason})
        deadline = time.monotonic() + flush_s
        while self.channel is not None and self.channel.readyState == "open" and self.channel.bufferedAmount:
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.02)


class PeerCall:
    """One browser's peer connection: the answer to its offer, then a Call fed by its audio track and data channel until
    either side ends it, the connection fails, or a limit does. Holds a call slot (and key quota) from offer to end.
    `state` is the app's AppState (server/app.py)."""

    def __init__(self, state, profile: Profile, quota_key: str | None) -> None:
        self.state, self.profile, self.quota_key = state, profile, quota_key
        settings = state.settings
        ice = [RTCIceServer(**server) for server in settings.ice_servers]
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=ice))
        self.io = PeerIO(PacedTrack())
        self.wire = BrowserWire(settings)
        self.wire.started = True  # the offer was the start
        self.messages = FrameRate(settings.max_frames_per_s)
        self.inbound: MediaStreamTrack | None = None
        self.call: Call | None = None
        self.task: asyncio.Task | None = None  # run(), once the offer is answered
        self.connected, self.gone = asyncio.Event(), asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        self.errors = ErrorLog(state.metrics, TRANSPORT)
        self.pc.on("track", self._on_track)
        self.pc.on("datachannel", self._on_channel)
        self.pc.on("connectionstatechange", self._on_state)

    async def answer(self, sdp: str) -> str:
        """Apply the browser's offer and answer it with our track and candidates; OfferError if the offer is unusable."""
        check_sdp(sdp)
        try:
            await self.pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="offer"))
            if not any(t.kind == "audio" for t in self.pc.getTransceivers()):
                why = "the offer has no audio section (m=audio): add a microphone track or an audio transceiver"
                raise OfferError(400, "no_audio", why)
            hand_on_at_once(self.pc)
            self.pc.addTrack(self.io.track)
            await self.pc.setLocalDescription(await self.pc.createAnswer())
        except OfferError:
            raise
        except Exception as e:  # aiortc raises ValueError, KeyError, AttributeError, ... on offers it cannot use
            raise OfferError(400, "bad_sdp", f"the offer is not valid SDP: {type(e).__name__}: {str(e)[:200]}") from None
        return self.pc.localDescription.sdp

    async def run(self) -> None:
        """Wait for the connection, run the call, then give everything back; never raises."""
        reason = "connect_timeout"
        try:
            if await self._until_connected():
                reason = await self._talk()
            elif not self.gone.is_set():
                await self.deny("connect_timeout", f"the peer connection did not connect within {self.state.settings.webrtc_connect_s:g} s")
            else:
                reason = "caller_disconnected"
        except asyncio.CancelledError:
            reason = "server_shutdown"
        except Exception:
            log.exception("webrtc call %s failed", self.call.id if self.call else "(not started)")
            reason = "error"
        finally:
            for task in self._tasks:
                task.cancel()
            self.state.calls.give_back(self.call)
            self.state.guard.quotas.give_back(self.quota_key)
            with contextlib.suppress(Exception):
                await self.io.end(reason)
            with contextlib.suppress(Exception):
                await self.pc.close()
            log.info("webrtc call %s ended: %s", self.call.id if self.call else "(not started)", reason)

    async def _until_connected(self) -> bool:
        waits = [asyncio.create_task(self.connected.wait()), asyncio.create_task(self.gone.wait())]
        try:
            await asyncio.wait(waits, timeout=self.state.settings.webrtc_connect_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
        return self.connected.is_set() and not self.gone.is_set()

    async def _talk(self) -> str:
        state = self.state
        self.call = call = Call(self.profile, state.stages, self.io, state.store, state.metrics, RATE, TRANSPORT)
        state.calls.hold(call)
        log.info("webrtc call %s started: profile %s", call.id, self.profile.id)
        await self.io.send_event({"type": "ready", "call_id": call.id})
        self._spawn(self._limit_duration())
        if self.inbound is not None:
            self._spawn(self._listen(self.inbound))
        return await call.run()

    def _spawn(self, coro) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_track(self, track: MediaStreamTrack) -> None:
        if track.kind != "audio" or self.inbound is not None:
            return
        self.inbound = track
        if self.call is not None:
            self._spawn(self._listen(track))

    def _on_channel(self, channel: RTCDataChannel) -> None:
        if self.io.channel is not None:
            return  # one control channel a call
        self.io.attach(channel)
        channel.on("message", self._on_message)

    def _on_state(self) -> None:
        state = self.pc.connectionState
        if state == "connected":
            self.connected.set()
        elif state in ("failed", "closed"):
            self.gone.set()
            self._hang_up("caller_disconnected")

    def _hang_up(self, reason: str) -> None:
        if self.call is not None:
            self.call.push(HangUp(reason))

    async def _listen(self, track: MediaStreamTrack) -> None:
        """Caller audio into the call; a track silent for MEDIA_SILENT_S after it started means the caller vanished."""
        started = False
        while True:
            try:
                frame = await (asyncio.wait_for(track.recv(), MEDIA_SILENT_S) if started else track.recv())
            except (MediaStreamError, TimeoutError):
                self._hang_up("caller_disconnected")
                return
            started = True
            samples = frame_samples(frame)
            if frame.sample_rate != RATE:
                samples = resample(samples, frame.sample_rate, RATE)
            self.call.push(AudioIn(samples, time.monotonic()))

    async def _limit_duration(self) -> None:
        await asyncio.sleep(self.state.settings.max_call_s)
        await self.deny("max_duration", f"calls are limited to {self.state.settings.max_call_s:g} s")
        self._hang_up("max_duration")

    async def _on_message(self, message: str | bytes) -> None:
        verdict = self.messages.check(time.monotonic())
        if verdict is not Verdict.PASS:
            if verdict is not Verdict.DROP:
                await self.deny("rate_limited", f"over {self.messages.per_s} data channel messages per second: dropped")
            if verdict is Verdict.CLOSE:
                self._hang_up("rate_limited")
            return
        if isinstance(message, bytes):
            await self.deny("bad_message", "the data channel carries JSON text messages; caller audio goes over the audio track")
            return
        try:
            events = self.wire.decode(message)
        except WireError as e:
            events = [e]
        for event in events:
            if isinstance(event, WireError):
                await self.deny(event.code, str(event))
            elif self.call is None:
                await self.deny("not_started", "the call starts once the connection is up")
            elif isinstance(event, Text):
                self.call.push(TextIn(event.text, time.monotonic()))
            elif isinstance(event, Digit):
                self.call.push(DtmfIn(event.digit, time.monotonic()))
            elif isinstance(event, Stopped):
                self._hang_up("caller_stop")

    async def deny(self, code: str, message: str) -> None:
        """Count, log (a warning the first time per kind) and send an `error` event; the call goes on."""
        self.errors.record(self.call.id if self.call else None, code, message)
        await self.io.send_event({"type": "error", "code": code, "message": message})


def check_sdp(sdp: str) -> None:
    """The shape of a session description (RFC 8866), which aiortc's lenient parser does not check; OfferError if not."""
    lines = [line for line in sdp.replace("\r\n", "\n").split("\n") if line]
    malformed = next((line for line in lines if len(line) < 2 or line[1] != "=" or not line[0].isalpha()), None)
    if malformed is not None or not lines or lines[0] != "v=0" or not any(line.startswith("m=") for line in lines):
        why = f"line '{malformed[:40]}' is not 'x=value'" if malformed is not None else "it needs 'v=0' first and an m= section"
        raise OfferError(400, "bad_sdp", f"the offer is not valid SDP: {why}")


def refused(error: OfferError) -> JSONResponse:
    return JSONResponse({"detail": str(error), "code": error.code}, error.status, headers=error.headers)


async def read_offer(request: Request) -> Offer:
    """The request body as an Offer, read at most MAX_OFFER_BYTES; OfferError (400) for anything else."""
    if int(request.headers.get("content-length") or 0) > MAX_OFFER_BYTES:
        raise OfferError(400, "offer_too_large", f"offers are limited to {MAX_OFFER_BYTES} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_OFFER_BYTES:
            raise OfferError(400, "offer_too_large", f"offers are limited to {MAX_OFFER_BYTES} bytes")
    try:
        return Offer.model_validate_json(bytes(body))
    except ValidationError as e:
        first = e.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "body"
        message = f"expected JSON {{type: 'offer', sdp, profile}}: field '{field}': {first['msg']}"
        raise OfferError(400, "bad_offer", message) from None


def take_call(state, request: Request, profile_id: str) -> tuple[Profile, str | None]:
    """The profile, the key's quota and a call slot, or OfferError (404, 429, 503)."""
    if (profile := state.profiles.get(profile_id)) is None:
        raise OfferError(404, "unknown_profile", f"no profile '{profile_id}'; GET /profiles lists them")
    key = state.guard.key_of(request)
    if not state.guard.quotas.take(key):
        denial = state.guard.quotas.refusal(key)
        raise OfferError(429, denial.code, denial.message, {"Retry-After": "60"})
    if not state.calls.take():
        state.guard.quotas.give_back(key)
        code, message = state.calls.refusal()
        raise OfferError(503, code, message, {"Retry-After": "30"})
    return profile, key


@router.get("/webrtc/ice")
async def ice_servers(request: Request) -> dict:
    """The STUN/TURN servers (TALKLINE_ICE_SERVERS) a page should give its RTCPeerConnection."""
    await guard_client(request)
    return {"iceServers": request.app.state.talkline.settings.ice_servers}


@router.post("/webrtc/offer")
async def offer(request: Request) -> JSONResponse:
    """Answer a browser's SDP offer and run its call; 400 for an unusable offer (nothing is opened), 404, 429, 503."""
    await guard_client(request)
    state = request.app.state.talkline
    try:
        body = await read_offer(request)
        profile, key = take_call(state, request, body.profile)
    except OfferError as e:
        state.metrics.errors.labels(code=e.code).inc()
        log.info("webrtc offer from %s refused: %s: %s", request.client.host if request.client else "?", e.code, e)
        return refused(e)
    peer = PeerCall(state, profile, key)
    try:
        sdp = await asyncio.wait_for(peer.answer(body.sdp), ANSWER_S)
    except (OfferError, TimeoutError) as e:
        error = e if isinstance(e, OfferError) else OfferError(400, "answer_timeout", f"could not answer the offer within {ANSWER_S:g} s")
        state.calls.give_back()
        state.guard.quotas.give_back(key)
        state.metrics.errors.labels(code=error.code).inc()
        log.warning("webrtc offer refused: %s: %s", error.code, error)
        with contextlib.suppress(Exception):
            await peer.pc.close()
        return refused(error)
    peer.task = asyncio.create_task(peer.run())
    state.peers.add(peer)
    peer.task.add_done_callback(lambda _: state.peers.discard(peer))
    return JSONResponse({"type": "answer", "sdp": sdp})
