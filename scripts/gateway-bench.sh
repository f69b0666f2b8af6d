#!/usr/bin/env bash
# The gateway against nginx, in one run on this machine, with wrk: the same upstream (nginx
# answering a small JSON body), the same keep-alive settings, three targets:
#   direct    wrk → upstream
#   nginx     wrk → nginx reverse proxy (keep-alive pool to the upstream) → upstream
#   gateway   wrk → Switchyard gateway (token checked, group access, affinity) → upstream
# All three in plain HTTP (the gateway with --gateway-plain-http), so TLS costs do not enter.
# Prints requests/s and latency percentiles per target, as a Markdown table.
#
#   scripts/gateway-bench.sh                 # 64 connections, 10 s each, release build
#   CONNS=16 SECONDS_EACH=5 scripts/gateway-bench.sh
#   SKIP_BUILD=1 scripts/gateway-bench.sh    # use the existing target/release/switchyard
#   PROFILE=perf.txt scripts/gateway-bench.sh  # also: where the gateway's CPU goes (perf)
set -euo pipefail
cd "$(dirname "$0")/.."

CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
SECONDS_EACH=${SECONDS_EACH:-10}
UP_PORT=${UP_PORT:-18081}
NGINX_PORT=${NGINX_PORT:-18082}
SY_PORT=${SY_PORT:-18083}
GW_PORTS=${GW_PORTS:-18090-18099}

need=()
command -v wrk >/dev/null || need+=(wrk)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
command -v jq >/dev/null || need+=(jq)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

if [ -z "${SKIP_BUILD:-}" ]; then
  cargo build --release -p switchyard --bin switchyard
fi
BIN=target/release/switchyard

WORK=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -f "$WORK/up.pid" ] && kill "$(cat "$WORK/up.pid")" 2>/dev/null || true
  [ -f "$WORK/px.pid" ] && kill "$(cat "$WORK/px.pid")" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# The upstream: one nginx worker answering a chat-completion-sized JSON body.
cat >"$WORK/up.conf" <<EOF
worker_processes 1;
daemon on;
pid $WORK/up.pid;
error_log $WORK/up-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  keepalive_timeout 60s;
  server {
    listen 127.0.0.1:$UP_PORT;
    location / {
      default_type application/json;
      return 200 '{"id":"cmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}';
    }
  }
}
EOF
# nginx as the reverse proxy: as many workers as the gateway has cores, a keep-alive pool.
cat >"$WORK/px.conf" <<EOF
worker_processes auto;
daemon on;
pid $WORK/px.pid;
error_log $WORK/px-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  keepalive_timeout 60s;
  upstream up { server 127.0.0.1:$UP_PORT; keepalive 128; }
  server {
    listen 127.0.0.1:$NGINX_PORT;
    location / {
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
EOF
"$NGINX" -c "$WORK/up.conf" -p "$WORK"
"$NGINX" -c "$WORK/px.conf" -p "$WORK"

# Switchyard with the demo data: an endpoint on the upstream, a gateway, a route, a token.
"$BIN" serve --demo --log-format text --listen "127.0.0.1:$SY_PORT" --gateway-plain-http \
  --database-url "sqlite://$WORK/bench.db?mode=rwc" --gateway-ports "$GW_PORTS" \
  >"$WORK/switchyard.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$SY_PORT/readyz" >/dev/null 2>&1 && break
  sleep 0.2
done
API="http://127.0.0.1:$SY_PORT/api/v1"
TOKEN=$(curl -fsS "$API/auth/login" -H 'content-type: application/json' \
  -d '{"tenant":"acme","username":"alice","password":"switchyard-demo"}' | jq -r .token)
auth=(-H "authorization: Bearer $TOKEN" -H 'content-type: application/json')
PROJECT=$(curl -fsS "$API/projects" "${auth[@]}" | jq -r '.items[0].id')
EP=$(curl -fsS "$API/endpoints" "${auth[@]}" \
  -d "{\"project_id\":\"$PROJECT\",\"name\":\"bench\",\"targets\":[\"127.0.0.1:$UP_PORT\"]}" | jq -r .id)
GW_JSON=$(curl -fsS "$API/gateways" "${auth[@]}" -d '{"name":"bench"}')
GW=$(jq -r .id <<<"$GW_JSON")
GW_PORT=$(jq -r .port <<<"$GW_JSON")
curl -fsS "$API/routes" "${auth[@]}" \
  -d "{\"gateway_id\":\"$GW\",\"path_prefix\":\"/\",\"endpoint_id\":\"$EP\"}" >/dev/null
GTOKEN=$(curl -fsS "$API/gateways/$GW/tokens" "${auth[@]}" -d '{"name":"bench"}' | jq -r .token)
for _ in $(seq 1 100); do
  curl -fsS -o /dev/null "http://127.0.0.1:$GW_PORT/v1/chat/completions" \
    -H "authorization: Bearer $GTOKEN" && break
  sleep 0.1
done

run() {
  local name=$1 url=$2; shift 2
  local out
  out=$(wrk -t"$THREADS" -c"$CONNS" -d"${SECONDS_EACH}s" --latency "$@" "$url")
  local rps p50 p90 p99 errors
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out")
  p90=$(awk '$1=="90%" {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  errors=$(awk '/Non-2xx|Socket errors/ {print}' <<<"$out" | tr '\n' ' ')
  printf '| %s | %s | %s | %s | %s | %s |\n' "$name" "$rps" "$p50" "$p90" "$p99" "${errors:-none}"
}

echo
echo "wrk -t$THREADS -c$CONNS -d${SECONDS_EACH}s, $(nproc) cores, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD)"
echo
echo "| target | requests/s | p50 | p90 | p99 | errors |"
echo "|---|---:|---:|---:|---:|---:|"
run direct "http://127.0.0.1:$UP_PORT/v1/chat/completions"
run nginx "http://127.0.0.1:$NGINX_PORT/v1/chat/completions"
if [ -n "${PROFILE:-}" ]; then
  perf record -F 999 -p "${pids[0]}" -o "$WORK/perf.data" -- sleep "$SECONDS_EACH" >/dev/null 2>&1 &
  perf_pid=$!
fi
run gateway "http://127.0.0.1:$GW_PORT/v1/chat/completions" -H "authorization: Bearer $GTOKEN"
if [ -n "${PROFILE:-}" ]; then
  wait "$perf_pid" || true
  { perf report -i "$WORK/perf.data" --no-children --sort dso --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | head -8; perf report -i "$WORK/perf.data" --no-children --sort dso,symbol --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | sed "s/  */ /g" | head -60; } >"$PROFILE"
fi
run gateway-session "http://127.0.0.1:$GW_PORT/v1/chat/completions" \
  -H "authorization: Bearer $GTOKEN" -H "x-session-id: user-42"
