#!/bin/bash
# One profile setting against the shipped skyways under the latency benchmark: one server, the shipped profile against
# a copy with the setting changed (`skyways-alt`), a warm-up pass, then runs alternated, one call then four.
# Usage: bench/profile_ab.sh [OUT_DIR] [SECTION.KEY=VALUE, or a turn detector alone; default text]
#   e.g. bench/profile_ab.sh runs/ab llm.warm_facts=false
set -euo pipefail
OUT=${1:-runs/bench}
SETTING=${2:-text}
[[ $SETTING == *=* ]] || SETTING="turn.detector=$SETTING"
SECTION=${SETTING%%.*}
KEY=${SETTING#*.} && KEY=${KEY%%=*}
VALUE=${SETTING#*=}
if grep -q "^  $KEY:" profiles/skyways.yaml || ! grep -q "^$SECTION:\$" profiles/skyways.yaml; then
  echo "profile_ab.sh: skyways.yaml must have a '$SECTION:' section without '$KEY'" >&2
  exit 2
fi
mkdir -p "$OUT/profiles"
cp profiles/*.yaml "$OUT/profiles/"
sed -e 's/^id: skyways$/id: skyways-alt/' -e "s/^$SECTION:\$/$SECTION:\n  $KEY: $VALUE/" \
  profiles/skyways.yaml > "$OUT/profiles/skyways-alt.yaml"
TALKLINE_PROFILES="$OUT/profiles" .venv/bin/talkline serve --port 8013 > "$OUT/ab_server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER' EXIT
for _ in $(seq 90); do curl -sf http://127.0.0.1:8013/healthz > /dev/null && break; sleep 2; done
.venv/bin/talkline bench latency --url ws://127.0.0.1:8013 --profile skyways --audio bench/audio/q*_piper*.wav --out "$OUT/ab_warmup.json"
for c in 1 4; do
  A=(--audio bench/audio/*.wav); [ $c = 4 ] && A=(--calls 4 --audio bench/audio/q*_piper*.wav)
  .venv/bin/talkline bench latency --url ws://127.0.0.1:8013 --profile skyways "${A[@]}" --out "$OUT/ab_${c}_shipped.json"
  .venv/bin/talkline bench latency --url ws://127.0.0.1:8013 --profile skyways-alt "${A[@]}" --out "$OUT/ab_${c}_$KEY-$VALUE.json"
done
