#!/bin/bash
# Turn-taking before and after under the latency benchmark: one server, the shipped skyways profile against a copy with
# the transcript rule and barge-in on any sound (`skyways-text`, the behaviour before the end-of-turn models), runs
# alternated, one call then four.
# Usage: bench/turn_ab.sh [OUT_DIR]
set -euo pipefail
OUT=${1:-runs/bench}
mkdir -p "$OUT/profiles"
cp profiles/*.yaml "$OUT/profiles/"
sed -e 's/^id: skyways$/id: skyways-text/' -e 's/^turn:$/turn:\n  detector: text\n  barge_in_reads_words: false/' \
  profiles/skyways.yaml > "$OUT/profiles/skyways-text.yaml"
TALKLINE_PROFILES="$OUT/profiles" .venv/bin/talkline serve --port 8013 > "$OUT/turn_ab_server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER' EXIT
for _ in $(seq 90); do curl -sf http://127.0.0.1:8013/healthz > /dev/null && break; sleep 2; done
for c in 1 4; do
  A=(--audio bench/audio/*.wav); [ $c = 4 ] && A=(--calls 4 --audio bench/audio/q*_piper*.wav)
  .venv/bin/talkline bench latency --url ws://127.0.0.1:8013 --profile skyways-text "${A[@]}" --out "$OUT/turn_ab_${c}_text.json"
  .venv/bin/talkline bench latency --url ws://127.0.0.1:8013 --profile skyways "${A[@]}" --out "$OUT/turn_ab_${c}_combined.json"
done
