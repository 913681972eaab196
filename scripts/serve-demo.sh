#!/usr/bin/env bash
# The quick start's main job: starts `canopy serve` on the embedded default model (a
# built-in seeded synthetic Llama) or on the engine settings given as arguments, shows
# requests against it with curl, then stops it with SIGTERM (a clean drain, exit 0).
#   scripts/serve-demo.sh                       # built-in model on 127.0.0.1:8080
#   scripts/serve-demo.sh --port 9000 --model ../shared/models/stories260K/stories260K.bin
# Run `build/apps/canopy/canopy serve` yourself to keep a server up.
set -euo pipefail

canopy="${CANOPY:-build/apps/canopy/canopy}"
port=8080
args=("$@")
for ((i = 0; i < ${#args[@]}; ++i)); do
  [ "${args[i]}" = "--port" ] && port="${args[i + 1]}"
done
url="http://127.0.0.1:${port}"

"$canopy" serve "$@" &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  curl -sf "$url/healthz" >/dev/null 2>&1 && break
  kill -0 "$server" 2>/dev/null || { echo "canopy serve failed to start" >&2; exit 1; }
  sleep 0.1
done

show() { # METHOD PATH [BODY]
  echo
  echo "\$ curl -s -X $1 $url$2${3:+ -d '$3'}"
  curl -s -X "$1" "$url$2" ${3:+-d "$3"}
  echo
}
show GET /v1/model
show POST /v1/logprobs '{"tokens": [1, 403, 407], "top_k": 5}'
show POST /v1/logprobs '{"batch": [[1, 403], [1, 403, 407]], "top_k": 3}'
show POST /v1/sample '{"tokens": [1, 403], "max_tokens": 8, "temperature": 0}'
echo
echo "\$ curl -s $url/metrics | grep -E '^canopy_(queries|cache_hits|tokens_computed)'"
curl -s "$url/metrics" | grep -E '^canopy_(queries|cache_hits|tokens_computed)' || true

kill -TERM "$server"
wait "$server" && echo && echo "canopy serve stopped cleanly (SIGTERM, exit 0)"
trap - EXIT
