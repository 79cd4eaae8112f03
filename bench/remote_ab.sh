#!/bin/bash
# The remote LLM path against the embedded one under the latency benchmark, side by side in one run:
# `talkline serve` (embedded) and `talkline serve --llm sglang` pointed at `talkline engine`.
# Usage: bench/remote_ab.sh [OUT_DIR] [extra `talkline engine` flags, e.g. --cache-tokens 0]
set -euo pipefail
OUT=${1:-runs/bench}; shift || true
mkdir -p "$OUT"
.venv/bin/talkline engine --port 30011 "$@" > "$OUT/remote_engine.log" 2>&1 &
ENGINE=$!
.venv/bin/talkline serve --port 8021 > "$OUT/remote_embedded_server.log" 2>&1 &
EMBEDDED=$!
.venv/bin/talkline serve --port 8022 --llm sglang --llm-url http://127.0.0.1:30011 > "$OUT/remote_sglang_server.log" 2>&1 &
REMOTE=$!
trap 'kill $ENGINE $EMBEDDED $REMOTE' EXIT
for p in 8021 8022; do for _ in $(seq 90); do curl -sf http://127.0.0.1:$p/healthz > /dev/null && break; sleep 2; done; done
for _ in $(seq 90); do curl -sf http://127.0.0.1:30011/health > /dev/null && break; sleep 2; done
.venv/bin/talkline bench latency --url ws://127.0.0.1:8021 --audio bench/audio/q*_piper*.wav --out "$OUT/remote_embedded.json"
.venv/bin/talkline bench latency --url ws://127.0.0.1:8022 --audio bench/audio/q*_piper*.wav --out "$OUT/remote_sglang.json"
