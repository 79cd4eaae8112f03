// The demo page: profiles, the call button, the conversation, latency rows, the level meter and notices.
import { Call, MicError } from "./call.js";
import { RtcCall } from "./rtc_call.js";

const $ = (id) => document.getElementById(id);
const STATE_LABELS = { idle: "Not in a call", connecting: "Connecting…", listening: "Listening", thinking: "Thinking…", speaking: "Speaking" };
const END_REASONS = {
  caller_stop: "Call ended.",
  caller_disconnected: "Call ended: the connection dropped.",
  max_duration: "Call ended: it reached the server's time limit.",
  agent_hangup: "The agent ended the call.",
  error: "The call failed on the server; see its log.",
};
const INFO_ENDS = new Set(["caller_stop", "agent_hangup"]);
const CLOSE_CODES = {
  1001: "the server is shutting down",
  1006: "the connection was lost",
  1011: "server error",
  1012: "the server is restarting or shutting down",
  4400: "bad start message",
  4401: "a valid API key is needed (the field at the top)",
  4403: "this server only accepts calls from its own machine or allowed origins",
  4404: "unknown profile",
  4429: "too many connections or frames; wait a minute",
  4503: "the server is busy; try again later",
};
const MIC_FEATURES = { echoCancellation: "echo cancellation", noiseSuppression: "noise suppression", autoGainControl: "auto gain" };

const TRANSPORTS = { webrtc: RtcCall, websocket: Call };
const TRANSPORT_KEY = "talkline.transport";

// Read by tests and by anyone measuring from the console.
window.talkline = { playedSamples: 0, state: "idle", callId: null };

let chosen = null;
let call = null;
let replying = false; // from the end of a caller turn (or the call's start) to the agent's final text
let buffered = 0; // agent samples queued in the player
let callerBubble = null; // the caller utterance being recognised
let agentBubble = null; // the agent reply being written
let endReason = null; // from the server's `end` event
let lastError = null; // the last `error` event, shown again if the socket then closes

function notify(text, kind = "error") {
  $("notice-text").textContent = text;
  $("notice").dataset.kind = kind;
  $("notice").hidden = false;
}

function setState(state) {
  window.talkline.state = state;
  $("state").dataset.state = state;
  $("state").textContent = STATE_LABELS[state];
}

function refreshState() {
  if (!call) return setState("idle");
  if (!window.talkline.callId) return setState("connecting");
  setState(buffered > 0 ? "speaking" : replying ? "thinking" : "listening");
}

// ---- profiles ----------------------------------------------------------------------------------

function choose(profile) {
  chosen = profile;
  for (const chip of $("profiles").children) chip.setAttribute("aria-checked", String(chip.dataset.id === profile.id));
  $("brand-name").textContent = profile.brand;
  $("brand-sector").textContent = profile.sector;
  $("brand-greeting").textContent = profile.greeting;
  // A stable accent colour per brand, from its id.
  const hue = [...profile.id].reduce((h, c) => (h * 31 + c.charCodeAt(0)) % 360, 7);
  document.documentElement.style.setProperty("--hue", String(hue));
}

async function loadProfiles() {
  let profiles;
  $("profiles").replaceChildren();
  $("call-button").disabled = true;
  try {
    let health;
    [profiles, health] = await Promise.all([fetchJson("/profiles"), fetchJson("/healthz")]);
    $("server-info").textContent = `${location.host} · LLM ${health.llm}`;
  } catch (err) {
    if (err.status === 401) {
      $("server-info").textContent = location.host;
      notify("This server needs an API key: enter it in the field at the top.", "warning");
    } else {
      $("server-info").textContent = "server unreachable";
      notify(`Cannot reach the Talkline server at ${location.origin} (${err.message}). Is \`talkline serve\` running?`);
    }
    return;
  }
  for (const profile of profiles) {
    const chip = document.createElement("button");
    chip.type = "button";
    chip.className = "chip";
    chip.setAttribute("role", "radio");
    chip.dataset.id = profile.id;
    chip.textContent = profile.brand;
    chip.onclick = () => choose(profile);
    $("profiles").append(chip);
  }
  if (profiles.length) {
    choose(profiles.find((p) => p.id === location.hash.slice(1)) || profiles[0]);
    $("call-button").disabled = false;
  } else {
    notify("The server has no profiles: add YAML files to profiles/ and restart it.");
  }
}

async function fetchJson(url) {
  const token = localStorage.getItem(TOKEN_KEY);
  const response = await fetch(url, token ? { headers: { Authorization: `Bearer ${token}` } } : {});
  if (!response.ok) throw Object.assign(new Error(`${url} answered ${response.status}`), { status: response.status });
  return response.json();
}

// ---- the API key (TALKLINE_API_KEYS), remembered in this browser --------------------------------

const TOKEN_KEY = "talkline.token";

function setupToken() {
  $("token").value = localStorage.getItem(TOKEN_KEY) || "";
  $("token").onchange = () => {
    const token = $("token").value.trim();
    if (token) localStorage.setItem(TOKEN_KEY, token);
    else localStorage.removeItem(TOKEN_KEY);
    $("notice").hidden = true;
    loadProfiles();
  };
}

// ---- conversation ------------------------------------------------------------------------------

function bubble(role, text, extraClass = "") {
  const item = document.createElement("li");
  item.className = `bubble ${role} ${extraClass}`.trim();
  item.textContent = text;
  $("messages").append(item);
  scrollDown();
  return item;
}

function scrollDown() {
  $("messages").scrollTop = $("messages").scrollHeight;
}

function onTranscript({ text, final }) {
  if (!final) {
    callerBubble ??= bubble("caller", "", "interim");
    callerBubble.textContent = text;
    return scrollDown();
  }
  if (text) {
    callerBubble ??= bubble("caller", "");
    callerBubble.textContent = text;
    callerBubble.classList.remove("interim");
    replying = true;
  } else {
    callerBubble?.remove(); // VAD heard speech, ASR found no words
  }
  callerBubble = null;
}

function onAgentText({ text, final }) {
  if (!final) {
    agentBubble ??= bubble("agent", "", "streaming");
    agentBubble.textContent += text;
    return scrollDown();
  }
  // The final frame carries the reply as the caller heard it: it replaces what streamed,
  // and is shorter than it when the caller cut the agent off.
  replying = false;
  if (text) {
    const squash = (t) => t.replace(/\s+/g, "");
    const streamed = agentBubble?.textContent ?? "";
    agentBubble ??= bubble("agent", "");
    agentBubble.textContent = text;
    agentBubble.classList.remove("streaming");
    agentBubble.classList.toggle("interrupted", squash(text).length < squash(streamed).length);
  } else {
    agentBubble?.remove(); // interrupted before a word was heard
  }
  agentBubble = null;
}

function addLatencyRow(m) {
  const cell = (v) => (v == null ? "—" : Math.round(v).toLocaleString());
  const row = document.createElement("tr");
  for (const value of [m.turn, cell(m.asr_ms), cell(m.llm_ttft_ms), cell(m.tts_ttfb_ms), cell(m.voice_to_voice_ms)]) {
    const td = document.createElement("td");
    td.textContent = value;
    row.append(td);
  }
  $("latency").tBodies[0].append(row);
  $("latency-empty").hidden = true;
}

// What the browser actually applied, which may differ from what the page asked for.
function micNote(settings) {
  const features = Object.entries(MIC_FEATURES).map(([key, label]) => (settings[key] ? label : `no ${label}`));
  const rate = settings.sampleRate ? ` at ${settings.sampleRate / 1000} kHz` : "";
  const sent = $("transport").value === "webrtc" ? "sent as Opus over WebRTC" : "sent at 16 kHz over a WebSocket";
  return `Microphone on${rate}, ${sent} · ${features.join(", ")}`;
}

// WebRTC where the browser has it, else (or when chosen) the WebSocket; the choice is kept in this browser.
function setupTransport() {
  const select = $("transport");
  if (!("RTCPeerConnection" in window)) {
    select.querySelector('option[value="webrtc"]').disabled = true;
    select.value = "websocket";
  } else {
    select.value = localStorage.getItem(TRANSPORT_KEY) || "webrtc";
  }
  select.onchange = () => localStorage.setItem(TRANSPORT_KEY, select.value);
}

function onEvent(msg) {
  switch (msg.type) {
    case "ready":
      window.talkline.callId = msg.call_id;
      $("call-id").textContent = `call ${msg.call_id}`;
      replying = true; // the greeting
      setControls(true);
      break;
    case "transcript":
      onTranscript(msg);
      break;
    case "agent_text":
      onAgentText(msg);
      break;
    case "metrics":
      addLatencyRow(msg);
      break;
    case "error":
      lastError = `${msg.code}: ${msg.message}`;
      notify(`Server error ${lastError}`);
      break;
    case "transfer":
      notify(`The agent transferred you to ${msg.target}; on a phone line the call would go on there.`, "info");
      break;
    case "end":
      endReason = msg.reason;
      if (msg.reason === "transferred") break; // the transfer notice stays
      notify(END_REASONS[msg.reason] || `The server ended the call: ${msg.reason}.`, INFO_ENDS.has(msg.reason) ? "info" : "error");
      break;
  }
  refreshState();
}

// ---- the call ----------------------------------------------------------------------------------

function setControls(inCall) {
  $("call-button").classList.toggle("end", Boolean(call));
  $("call-label").textContent = call ? "End call" : "Start call";
  $("text-input").disabled = $("send").disabled = !inCall;
  $("text-input").placeholder = inCall ? "Type a message" : "Start a call, then speak — or type here";
  for (const chip of $("profiles").children) chip.disabled = Boolean(call);
  $("transport").disabled = Boolean(call);
}

function micMessage(err) {
  if (err instanceof MicError) return err.message;
  if (err.name === "NotAllowedError") return "Microphone access was denied. Allow it in the site settings and call again, or type your questions.";
  if (err.name === "NotFoundError") return "No microphone found. Type your questions instead.";
  return `The microphone could not be opened (${err.name}: ${err.message}). Type your questions instead.`;
}

function showLevel(rms) {
  const db = 20 * Math.log10(rms + 1e-9);
  const fraction = Math.min(1, Math.max(0, (db + 60) / 60));
  $("meter").setAttribute("aria-valuenow", db.toFixed(0));
  $("meter-fill").style.clipPath = `inset(0 ${(100 * (1 - fraction)).toFixed(1)}% 0 0)`;
}

function onClosed({ code, reason, opened }) {
  if (!opened && !call.ended) {
    notify(`Cannot reach the call server at ${location.host} (the ${$("transport").value} connection closed with code ${code}).`);
  } else if (!endReason && code !== 1000) {
    const why = CLOSE_CODES[code] || reason || "no reason given";
    notify(`The call was closed: ${why} (code ${code})${lastError ? ` after ${lastError}` : ""}.`);
  }
  call = null;
  window.talkline.callId = null;
  buffered = 0;
  replying = false;
  callerBubble?.remove();
  callerBubble = agentBubble = null;
  showLevel(0);
  $("mic-note").textContent = "The microphone is used only during a call.";
  setControls(false);
  refreshState();
}

async function startCall() {
  $("notice").hidden = true;
  $("messages").replaceChildren();
  $("latency").tBodies[0].replaceChildren();
  $("latency-empty").hidden = false;
  window.talkline.playedSamples = 0;
  endReason = lastError = null;
  call = new TRANSPORTS[$("transport").value](chosen.id, localStorage.getItem(TOKEN_KEY), {
    event: onEvent,
    level: showLevel,
    playback: ({ played, buffered: queued }) => {
      window.talkline.playedSamples = played;
      buffered = queued;
      refreshState();
    },
    mic: (err, settings) => {
      $("mic-note").textContent = err ? "No microphone: type below." : micNote(settings);
      if (err) notify(micMessage(err), "warning");
    },
    closed: onClosed,
  });
  setControls(false);
  refreshState();
  try {
    await call.start();
  } catch (err) {
    call.hangUp();
    call.release();
    onClosed({ code: 1000, reason: "", opened: false });
    notify(`Could not start audio: ${err.message}`);
  }
}

$("call-button").onclick = () => (call ? call.hangUp() : startCall());
$("notice-close").onclick = () => ($("notice").hidden = true);
$("composer").onsubmit = (event) => {
  event.preventDefault();
  const text = $("text-input").value.trim();
  if (!text || !call?.live) return;
  call.sendText(text);
  bubble("caller", text, "typed");
  replying = true;
  $("text-input").value = "";
  refreshState();
};

setupToken();
setupTransport();
loadProfiles();
