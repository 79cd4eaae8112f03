#!/bin/bash
# Two `talkline serve` configurations under the latency benchmark: two servers side by side, runs alternated,
# one call over every question, then four calls at once.
# Usage: bench/latency_ab.sh OUT_DIR "FLAGS_A" "FLAGS_B"   (each side's serve flags; default: "--no-spec" and none)
set -euo pipefail
OUT=${1:-runs/bench}
A_FLAGS=${2---no-spec}
B_FLAGS=${3-}
mkdir -p "$OUT"
# shellcheck disable=SC2086 # the flags are word lists
.venv/bin/talkline serve --port 8011 $A_FLAGS > "$OUT/ab_a_server.log" 2>&1 &
A=$!
# shellcheck disable=SC2086
.venv/bin/talkline serve --port 8012 $B_FLAGS > "$OUT/ab_b_server.log" 2>&1 &
B=$!
trap 'kill $A $B' EXIT
for p in 8011 8012; do for _ in $(seq 90); do curl -sf http://127.0.0.1:$p/healthz > /dev/null && break; sleep 2; done; done
for c in 1 4; do
  ARGS=(--audio bench/audio/*.wav); [ $c = 4 ] && ARGS=(--calls 4 --audio bench/audio/q*_piper*.wav)
  .venv/bin/talkline bench latency --url ws://127.0.0.1:8011 "${ARGS[@]}" --out "$OUT/ab_${c}_a.json"
  .venv/bin/talkline bench latency --url ws://127.0.0.1:8012 "${ARGS[@]}" --out "$OUT/ab_${c}_b.json"
done
