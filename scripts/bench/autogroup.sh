#!/usr/bin/env bash
# Why scripts/gateway-bench.sh starts the server in a session of its own: the same nginx
# reverse proxy, measured alternately as nginx runs by default (`daemon on`: setsid, a
# session and so a scheduling autogroup of its own) and in the caller's session (`daemon off`,
# started in the background from this script, as wrk is). With autogroup scheduling on
# (kernel.sched_autogroup_enabled=1), a proxy in wrk's session shares one group's CPU share
# with wrk. Prints one line per run and the mean of each.
#
#   scripts/bench/autogroup.sh              # 6 rounds of 8 s each, 2 workers
#   ROUNDS=10 SECONDS_EACH=10 WORKERS=1 scripts/bench/autogroup.sh
set -euo pipefail
ROUNDS=${ROUNDS:-6}
SECONDS_EACH=${SECONDS_EACH:-8}
WORKERS=${WORKERS:-2}
UP=${UP_PORT:-19081}; OWN=${OWN_PORT:-19082}; SAME=${SAME_PORT:-19083}
for c in wrk nginx; do
  command -v $c >/dev/null || [ -x /usr/sbin/$c ] || { echo "needs $c (Debian: wrk, nginx-light)" >&2; exit 1; }
done
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
W=$(mktemp -d)
SAME_PID=""
cleanup() {
  for f in up own; do [ -f "$W/$f.pid" ] && kill "$(cat "$W/$f.pid")" 2>/dev/null; done
  [ -n "$SAME_PID" ] && kill "$SAME_PID" 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT
BODY='{"id":"cmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}'
cat >"$W/up.conf" <<E2
worker_processes 1; daemon on; pid $W/up.pid; error_log $W/up.err;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 1000000; default_type application/json;
  server { listen 127.0.0.1:$UP; location / { return 200 '$BODY'; } } }
E2
proxy() { # NAME PORT DAEMON
  cat >"$W/$1.conf" <<E2
worker_processes $WORKERS; daemon $3; pid $W/$1.pid; error_log $W/$1.err;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 1000000;
  upstream up { server 127.0.0.1:$UP; keepalive 128; }
  server { listen 127.0.0.1:$2;
    location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_buffering off; } } }
E2
}
proxy own "$OWN" on
proxy same "$SAME" off
"$NGINX" -c "$W/up.conf" -p "$W"
"$NGINX" -c "$W/own.conf" -p "$W"
"$NGINX" -c "$W/same.conf" -p "$W" &
SAME_PID=$!
for _ in $(seq 1 50); do
  curl -fsS -o /dev/null "http://127.0.0.1:$OWN/" 2>/dev/null && curl -fsS -o /dev/null "http://127.0.0.1:$SAME/" 2>/dev/null && break
  sleep 0.1
done
echo "autogroup $(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || echo '?'), $(nproc) cores, $WORKERS nginx workers, wrk -t2 -c64 -d${SECONDS_EACH}s, $("$NGINX" -v 2>&1 | sed 's/.*version: //')"
echo "session of wrk: $(ps -o sid= -p $$ | tr -d ' '); of nginx own: $(ps -o sid= -p "$(cat "$W/own.pid")" | tr -d ' '); of nginx same: $(ps -o sid= -p "$SAME_PID" | tr -d ' ')"
declare -A sum
for r in $(seq 1 "$ROUNDS"); do
  for t in own:$OWN same:$SAME; do
    n=${t%%:*}; p=${t##*:}
    rps=$(wrk -t2 -c64 -d"${SECONDS_EACH}s" "http://127.0.0.1:$p/" | awk '/Requests\/sec/ {print $2}')
    echo "round $r  nginx in $([ "$n" = own ] && echo 'its own session ' || echo "wrk's session   ")  $rps req/s"
    sum[$n]=$(awk -v a="${sum[$n]:-0}" -v b="$rps" 'BEGIN {print a + b}')
  done
done
awk -v o="${sum[own]}" -v s="${sum[same]}" -v n="$ROUNDS" 'BEGIN {
  printf "mean: its own session %.0f req/s, wrk'"'"'s session %.0f req/s (%.1f %% of its own)\n", o / n, s / n, 100 * s / o }'
