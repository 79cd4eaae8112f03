// One call over WebRTC (POST /webrtc/offer): the microphone goes out as an Opus track with the browser's echo
// cancellation, noise suppression and auto gain; the agent's voice comes back on a track; the protocol's events come on
// the `talkline` data channel. The same handlers and methods as the WebSocket Call (call.js).
import { MicError } from "./call.js";

const AUDIBLE_RMS = 0.003; // above Opus's comfort noise: the agent is speaking
const GATHER_MS = 3000; // the longest wait for ICE candidates before the offer goes out with what it has
const STATUS_CODES = { 400: 4400, 401: 4401, 403: 4403, 404: 4404, 429: 4429, 503: 4503 }; // as the WebSocket closes

export class RtcCall {
  // handlers: event(msg), level(rms), playback({played, buffered}), mic(error, trackSettings), closed({code, reason, opened})
  constructor(profile, token, handlers) {
    this.profile = profile;
    this.token = token;
    this.on = handlers;
    this.ctx = new AudioContext({ latencyHint: "interactive" }); // created in the click handler: allowed to play
    this.pc = null;
    this.channel = null;
    this.stream = null;
    this.opened = false;
    this.ended = false;
    this.finished = false;
    this.played = 0;
  }

  async start() {
    await this.ctx.resume();
    await this.ctx.audioWorklet.addModule("/static/capture.worklet.js");
    try {
      this.on.mic(null, await this.openMicrophone());
    } catch (err) {
      this.on.mic(err, null);
    }
    if (this.ended) {
      this.finish(1000, "");
      return;
    }
    await this.connect();
  }

  // The level meter reads the microphone through the capture worklet; the audio itself goes to the peer connection.
  async openMicrophone() {
    if (!navigator.mediaDevices?.getUserMedia) {
      throw new MicError("This page is not a secure context (use https:// or localhost), so the browser offers no microphone.");
    }
    this.stream = await navigator.mediaDevices.getUserMedia({
      audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true, channelCount: 1 },
    });
    this.tap(this.stream, ({ rms }) => this.on.level(rms));
    return this.stream.getAudioTracks()[0].getSettings();
  }

  tap(stream, onFrame) {
    const node = new AudioWorkletNode(this.ctx, "talkline-capture", {
      numberOfInputs: 1,
      numberOfOutputs: 0,
      channelCount: 1,
      channelCountMode: "explicit",
    });
    node.port.onmessage = ({ data }) => onFrame(data);
    this.ctx.createMediaStreamSource(stream).connect(node);
  }

  headers() {
    return this.token ? { Authorization: `Bearer ${this.token}` } : {};
  }

  async connect() {
    const ice = await fetch("/webrtc/ice", { headers: this.headers() });
    const { iceServers } = ice.ok ? await ice.json() : { iceServers: [] };
    this.pc = new RTCPeerConnection({ iceServers });
    const track = this.stream?.getAudioTracks()[0];
    if (track) this.pc.addTrack(track, this.stream);
    else this.pc.addTransceiver("audio", { direction: "recvonly" }); // no microphone: listen and type
    this.channel = this.pc.createDataChannel("talkline");
    this.channel.onopen = () => (this.opened = true);
    this.channel.onmessage = ({ data }) => this.on.event(JSON.parse(data));
    this.channel.onclose = () => this.finish(1000, "");
    this.pc.ontrack = ({ track: remote }) => this.play(remote);
    this.pc.onconnectionstatechange = () => {
      if (["failed", "closed"].includes(this.pc.connectionState)) this.finish(1006, "the connection was lost");
    };
    await this.pc.setLocalDescription(await this.pc.createOffer());
    await this.gathered();
    const response = await fetch("/webrtc/offer", {
      method: "POST",
      headers: { "Content-Type": "application/json", ...this.headers() },
      body: JSON.stringify({ type: "offer", sdp: this.pc.localDescription.sdp, profile: this.profile }),
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      this.opened = true; // the server answered: its refusal is the reason, not an unreachable server
      this.finish(STATUS_CODES[response.status] || 1011, body.detail || `HTTP ${response.status}`);
      return;
    }
    await this.pc.setRemoteDescription(body);
  }

  gathered() {
    if (this.pc.iceGatheringState === "complete") return Promise.resolve();
    return new Promise((resolve) => {
      setTimeout(resolve, GATHER_MS);
      this.pc.addEventListener("icegatheringstatechange", () => this.pc.iceGatheringState === "complete" && resolve());
    });
  }

  // Chromium plays remote WebRTC audio only through a media element; the tap counts what the caller hears.
  play(track) {
    const stream = new MediaStream([track]);
    this.audio = new Audio();
    this.audio.srcObject = stream;
    this.audio.play().catch(() => {});
    this.tap(stream, ({ rms, pcm }) => {
      const audible = rms > AUDIBLE_RMS;
      if (audible) this.played += pcm.byteLength / 2;
      this.on.playback({ played: this.played, buffered: audible ? 1 : 0 });
    });
  }

  sendText(text) {
    this.channel.send(JSON.stringify({ type: "text", text }));
  }

  get live() {
    return this.channel?.readyState === "open";
  }

  // Silence at once; the server answers "stop" with an `end` event and closes the connection.
  hangUp() {
    this.ended = true;
    if (this.audio) this.audio.muted = true;
    if (this.live) {
      this.channel.send(JSON.stringify({ type: "stop" }));
      setTimeout(() => this.finish(1000, ""), 3000);
    } else {
      this.finish(1000, "");
    }
  }

  finish(code, reason) {
    if (this.finished) return;
    this.finished = true;
    this.release();
    this.on.closed({ code, reason, opened: this.opened });
  }

  release() {
    this.pc?.close();
    this.audio?.pause();
    this.stream?.getTracks().forEach((t) => t.stop());
    if (this.ctx.state !== "closed") this.ctx.close();
  }
}
