#!/bin/bash
# A turn-taking detector against the shipped one under the latency benchmark: one server, the shipped skyways profile
# against a copy with another `detector` (`skyways-alt`), a warm-up pass, then runs alternated, one call then four.
# Usage: bench/turn_ab.sh [OUT_DIR] [DETECTOR, default text]
set -euo pipefail
OUT=${1:-runs/bench}
DETECTOR=${2:-text}
mkdir -p "$OUT/profiles"
cp profiles/*.yaml "$OUT/profiles/"
sed -e 's/^id: skyways$/id: skyways-alt/' -e "s/^turn:\$/turn:\n  detector: $DETECTOR/" \
  profiles/skyways.yaml > "$OUT/profiles/skyways-alt.yaml"
TALKLINE_PROFILES="$OUT/profiles" .venv/bin/talkline serve --port 8013 > "$OUT/turn_ab_server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER' EXIT
for _ in $(seq 90); do curl -sf http://127.0.0.1:8013/healthz > /dev/null && break; sleep 2; done
.venv/bin/talkline bench latency --url ws://127.0.0.1:8013 --profile skyways --audio bench/audio/q*_piper*.wav --out "$OUT/turn_ab_warmup.json"
for c in 1 4; do
  A=(--audio bench/audio/*.wav); [ $c = 4 ] && A=(--calls 4 --audio bench/audio/q*_piper*.wav)
  .venv/bin/talkline bench latency --url ws://127.0.0.1:8013 --profile skyways "${A[@]}" --out "$OUT/turn_ab_${c}_shipped.json"
  .venv/bin/talkline bench latency --url ws://127.0.0.1:8013 --profile skyways-alt "${A[@]}" --out "$OUT/turn_ab_${c}_$DETECTOR.json"
done
