// One call over /ws/call: microphone -> capture worklet (16 kHz, 20 ms frames) -> socket;
// socket -> protocol events for the page, agent audio -> player worklet. Knows nothing about the page.

const RATES = [8000, 16000, 22050, 24000, 32000, 44100, 48000];

export class MicError extends Error {}

export class Call {
  // handlers: event(msg), level(rms), playback({played, buffered}), mic(error, trackSettings), closed({code, reason, opened})
  constructor(profile, token, handlers) {
    this.profile = profile;
    this.token = token; // an API key, sent as ?token= (browsers cannot set headers on a WebSocket)
    this.on = handlers;
    // Created inside the click handler (a user gesture), so the browser lets it play.
    this.ctx = new AudioContext({ latencyHint: "interactive" });
    // Agent audio comes at the context rate when the protocol allows it; otherwise the player resamples.
    this.outputRate = RATES.includes(this.ctx.sampleRate) ? this.ctx.sampleRate : 16000;
    this.ws = null;
    this.stream = null;
    this.ended = false;
  }

  async start() {
    await this.ctx.resume();
    await Promise.all([
      this.ctx.audioWorklet.addModule("/static/capture.worklet.js"),
      this.ctx.audioWorklet.addModule("/static/player.worklet.js"),
    ]);
    this.player = new AudioWorkletNode(this.ctx, "talkline-player", {
      numberOfInputs: 0,
      outputChannelCount: [1],
      processorOptions: { inputRate: this.outputRate },
    });
    this.player.port.onmessage = ({ data }) => this.on.playback(data);
    this.player.connect(this.ctx.destination);
    try {
      this.on.mic(null, await this.openMicrophone());
    } catch (err) {
      this.on.mic(err, null);
    }
    if (this.ended) {
      // Hung up while the browser was still asking for the microphone.
      this.release();
      this.on.closed({ code: 1000, reason: "", opened: false });
      return;
    }
    this.connect();
  }

  async openMicrophone() {
    if (!navigator.mediaDevices?.getUserMedia) {
      throw new MicError("This page is not a secure context (use https:// or localhost), so the browser offers no microphone.");
    }
    this.stream = await navigator.mediaDevices.getUserMedia({
      audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true, channelCount: 1 },
    });
    const source = this.ctx.createMediaStreamSource(this.stream);
    // No outputs: Chromium then pulls the node on its own, without routing the microphone to the speakers.
    const capture = new AudioWorkletNode(this.ctx, "talkline-capture", {
      numberOfInputs: 1,
      numberOfOutputs: 0,
      channelCount: 1,
      channelCountMode: "explicit",
    });
    capture.port.onmessage = ({ data }) => {
      this.on.level(data.rms);
      if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(data.pcm);
    };
    source.connect(capture);
    return this.stream.getAudioTracks()[0].getSettings();
  }

  connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const query = this.token ? `?token=${encodeURIComponent(this.token)}` : "";
    this.ws = new WebSocket(`${scheme}//${location.host}/ws/call${query}`);
    this.ws.binaryType = "arraybuffer";
    let opened = false;
    this.ws.onopen = () => {
      opened = true;
      this.ws.send(JSON.stringify({ type: "start", profile: this.profile, sample_rate: 16000, output_sample_rate: this.outputRate }));
    };
    this.ws.onmessage = ({ data }) => {
      if (typeof data !== "string") {
        this.player.port.postMessage(data, [data]);
        return;
      }
      const msg = JSON.parse(data);
      if (msg.type === "interrupt") this.player.port.postMessage("flush");
      this.on.event(msg);
    };
    this.ws.onclose = ({ code, reason }) => {
      this.release();
      this.on.closed({ code, reason, opened });
    };
  }

  sendText(text) {
    this.ws.send(JSON.stringify({ type: "text", text }));
  }

  get live() {
    return this.ws?.readyState === WebSocket.OPEN;
  }

  // Silence at once; the server answers "stop" with an `end` event and closes the socket.
  hangUp() {
    this.ended = true;
    this.player?.port.postMessage("flush");
    if (this.live) {
      this.ws.send(JSON.stringify({ type: "stop" }));
      setTimeout(() => this.ws.close(), 3000);
    } else {
      this.ws?.close();
    }
  }

  release() {
    this.stream?.getTracks().forEach((t) => t.stop());
    if (this.ctx.state !== "closed") this.ctx.close();
  }
}
