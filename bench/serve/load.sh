#!/usr/bin/env bash
# The reward server's loopback load test (BENCHMARKS.md): `verifine serve`
# and the anchor — FastAPI + uvicorn with a Python port of math-answer —
# behind the same /get_reward, one query and 64 per request, measured by wrk
# in the same run on the same machine. Then a promotion during a load run:
# it must fail no request. Needs wrk (Debian's package).
#
#     bench/serve/load.sh [seconds per run, default 10] [connections, default 32]
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
seconds=${1:-10}
connections=${2:-32}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

command -v wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 1; }
cargo build --quiet --release -p verifine
verifine=$root/target/release/verifine
venv=$root/bench/.venv
[ -x "$venv/bin/uvicorn" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install --quiet fastapi uvicorn; }

data=${VERIFINE_SHARED_DATA:-$root/../shared/data}/gsm8k/model_solutions.jsonl
(cd bench/serve && "$venv/bin/python" bodies.py "$data" "$work")

wait_port() { for _ in $(seq 200); do (echo > /dev/tcp/127.0.0.1/$1) 2>/dev/null && return; sleep 0.05; done; echo "nothing on port $1" >&2; exit 1; }

"$verifine" serve --rubric math-answer --port 8101 --dir "$work/serve" > "$work/verifine.log" 2>&1 &
verifine_pid=$!
(cd bench/serve && "$venv/bin/python" fastapi_server.py 8102 2 > "$work/fastapi.log" 2>&1) &
wait_port 8101
wait_port 8102

# The port must give verifine's rewards before it is timed.
curl -s -X POST -H 'content-type: application/json' --data-binary @"$work/all.json" http://127.0.0.1:8101/get_reward > "$work/verifine-all.json"
"$venv/bin/python" - "$work" <<'PY'
import json, sys, pathlib
work = pathlib.Path(sys.argv[1])
ours = json.loads((work / "verifine-all.json").read_text())["rewards"]
port = json.loads((work / "port-rewards.json").read_text())
same = sum(abs(a - b) < 1e-9 for a, b in zip(ours, port))
print(f"port check: {same}/{len(ours)} rewards identical to verifine's")
sys.exit(0 if same == len(ours) else 1)
PY

run() { # name port body
    BODY_FILE="$work/$3.json" wrk -t1 -c"$connections" -d"${seconds}s" --latency -s bench/serve/post.lua "http://127.0.0.1:$2/get_reward" \
        | sed -n "s/^RESULT /$1 $3 /p"
}
echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
echo "wrk: 1 thread, $connections connections, ${seconds}s per run"
for body in single batch64; do
    run fastapi 8102 "$body"
    run verifine 8101 "$body"
done

# A promotion in the middle of a load run.
built=$("$verifine" plugin build examples/loophole-rubric | "$venv/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["path"])')
(sleep $((seconds / 2)); "$verifine" plugin promote "$work/serve" rubric "$built" > /dev/null) &
run verifine-swap 8101 single
sleep 1
grep -c '"promoted"' "$work/serve/events.jsonl" | sed 's/^/promotions during the run: /'
kill $verifine_pid
