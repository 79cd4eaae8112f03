// Microphone -> 16 kHz mono PCM s16le in 20 ms frames (320 samples, 640 bytes), each with its RMS level.
// The context runs at the device rate (44.1/48 kHz; Firefox cannot connect a microphone to a context at
// another rate), so this low-passes below 8 kHz and resamples by linear interpolation.

const OUT_RATE = 16000;
const FRAME = 320;

// Blackman-windowed sinc, `cutoff` in cycles per input sample, unity gain at DC.
function lowpass(cutoff, taps) {
  const h = new Float32Array(taps);
  const mid = (taps - 1) / 2;
  let sum = 0;
  for (let i = 0; i < taps; i++) {
    const x = i - mid;
    const sinc = x === 0 ? 2 * cutoff : Math.sin(2 * Math.PI * cutoff * x) / (Math.PI * x);
    const phase = (2 * Math.PI * i) / (taps - 1);
    h[i] = sinc * (0.42 - 0.5 * Math.cos(phase) + 0.08 * Math.cos(2 * phase));
    sum += h[i];
  }
  return h.map((v) => v / sum);
}

class Capture extends AudioWorkletProcessor {
  constructor() {
    super();
    this.step = sampleRate / OUT_RATE; // input samples per output sample
    this.taps = this.step > 1 ? lowpass(0.45 / this.step, 32 * Math.ceil(this.step) + 1) : Float32Array.of(1);
    this.ring = new Float32Array(this.taps.length);
    this.head = 0;
    this.prev = 0; // the previous filtered input sample
    this.frac = 1; // where the next output sample lies after `prev`, in input samples
    this.newFrame();
  }

  newFrame() {
    this.frame = new Int16Array(FRAME);
    this.filled = 0;
    this.energy = 0;
  }

  filter(x) {
    const n = this.taps.length;
    this.ring[this.head] = x;
    let acc = 0;
    for (let t = 0, j = this.head; t < n; t++, j = j === 0 ? n - 1 : j - 1) acc += this.taps[t] * this.ring[j];
    this.head = (this.head + 1) % n;
    return acc;
  }

  emit(v) {
    const s = Math.max(-1, Math.min(1, v));
    this.frame[this.filled++] = Math.round(s * 32767);
    this.energy += s * s;
    if (this.filled === FRAME) {
      const rms = Math.sqrt(this.energy / FRAME);
      this.port.postMessage({ pcm: this.frame.buffer, rms }, [this.frame.buffer]);
      this.newFrame();
    }
  }

  process(inputs) {
    const input = inputs[0][0]; // the node is mono (channelCount 1, explicit): the graph downmixes
    if (!input) return true;
    for (let k = 0; k < input.length; k++) {
      const y = this.filter(input[k]);
      for (; this.frac <= 1; this.frac += this.step) this.emit(this.prev + (y - this.prev) * this.frac);
      this.frac -= 1;
      this.prev = y;
    }
    return true;
  }
}

registerProcessor("talkline-capture", Capture);
