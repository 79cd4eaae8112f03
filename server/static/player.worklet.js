// Agent audio: a queue of PCM s16le chunks at the rate the server sends, played at the context rate
// (linear interpolation when they differ). "flush" empties the queue at once (barge-in).
// Reports {played, buffered} in input samples about 20 times a second and whenever playback starts or stops.

class Player extends AudioWorkletProcessor {
  constructor({ processorOptions }) {
    super();
    this.step = processorOptions.inputRate / sampleRate; // input samples per output sample
    this.queue = [];
    this.chunk = null;
    this.index = 0;
    this.prev = 0;
    this.cur = 0;
    this.frac = 1; // position between prev and cur; >= 1 means take the next input sample
    this.played = 0;
    this.buffered = 0;
    this.sinceReport = 0;
    this.wasPlaying = false;
    this.port.onmessage = ({ data }) => (data === "flush" ? this.flush() : this.push(new Int16Array(data)));
  }

  push(samples) {
    this.queue.push(samples);
    this.buffered += samples.length;
  }

  flush() {
    this.queue = [];
    this.chunk = null;
    this.buffered = 0;
    this.prev = this.cur = 0;
    this.frac = 1;
    this.report();
  }

  take() {
    while (this.chunk === null || this.index >= this.chunk.length) {
      if (!this.queue.length) return undefined;
      this.chunk = this.queue.shift();
      this.index = 0;
    }
    this.played++;
    this.buffered--;
    return this.chunk[this.index++] / 32768;
  }

  report() {
    this.sinceReport = 0;
    this.wasPlaying = this.buffered > 0;
    this.port.postMessage({ played: this.played, buffered: this.buffered });
  }

  process(_inputs, outputs) {
    const out = outputs[0][0];
    fill: for (let i = 0; i < out.length; i++) {
      for (; this.frac >= 1; this.frac -= 1) {
        const s = this.take();
        if (s === undefined) {
          out.fill(0, i);
          break fill;
        }
        this.prev = this.cur;
        this.cur = s;
      }
      out[i] = this.prev + (this.cur - this.prev) * this.frac;
      this.frac += this.step;
    }
    this.sinceReport += out.length;
    if (this.sinceReport >= sampleRate / 20 || this.wasPlaying !== this.buffered > 0) this.report();
    return true;
  }
}

registerProcessor("talkline-player", Player);
