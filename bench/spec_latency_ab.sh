#!/bin/bash
# Speculative decoding on vs off under the latency benchmark: two servers side by side, runs alternated.
# Usage: bench/spec_latency_ab.sh [OUT_DIR] [extra `talkline serve` flags for the spec server, e.g. --drafter DIR]
set -euo pipefail
OUT=${1:-runs/bench}; shift || true
mkdir -p "$OUT"
.venv/bin/talkline serve --port 8011 --no-spec > "$OUT/ab_off_server.log" 2>&1 &
OFF=$!
.venv/bin/talkline serve --port 8012 "$@" > "$OUT/ab_on_server.log" 2>&1 &
ON=$!
trap 'kill $OFF $ON' EXIT
for p in 8011 8012; do for _ in $(seq 90); do curl -sf http://127.0.0.1:$p/healthz > /dev/null && break; sleep 2; done; done
for c in 1 4; do
  A=(--audio bench/audio/*.wav); [ $c = 4 ] && A=(--calls 4 --audio bench/audio/q*_piper*.wav)
  .venv/bin/talkline bench latency --url ws://127.0.0.1:8011 "${A[@]}" --out "$OUT/ab_${c}_off.json"
  .venv/bin/talkline bench latency --url ws://127.0.0.1:8012 "${A[@]}" --out "$OUT/ab_${c}_on.json"
done
