#!/usr/bin/env bash
# The gateway against nginx, in one run on this machine, with wrk: the same upstream (nginx
# answering a small JSON body), the same keep-alive settings, these targets:
#   direct           wrk → upstream
#   direct-tls       wrk → upstream's TLS listener (what TLS costs without a proxy)
#   nginx            wrk → nginx reverse proxy (keep-alive pool to the upstream) → upstream
#   nginx-tls        the same with TLS on nginx's listener
#   gateway          wrk → Switchyard gateway (token checked, group access, affinity,
#                    metrics) → upstream, plain HTTP (serve --gateway-plain-http)
#   gateway-session  the same with an x-session-id header
#   gateway-tls      the gateway with TLS (a second server start on the same database,
#                    without --gateway-plain-http, --gateway-tls-dir with the run's certificate)
# nginx has as many worker processes as the gateway's runtime has worker threads
# (TOKIO_WORKER_THREADS, else one per core), nginx and the gateway both present the same
# self-signed P-256 certificate, made per run.
# Measured, for each target:
#   saturation   wrk -t$THREADS -c$CONNS, as fast as it goes: requests/s, p50, p99
#   paced        the same fixed request rate ($RATE/s in all, scripts/bench/paced.lua):
#                achieved requests/s, p50, p99, and p99 added to direct's (the TLS targets: to
#                direct-tls's too)
#   idle         memory (VmRSS; nginx: master and workers) per 10,000 idle keep-alive
#                connections, each having served one request (scripts/bench/idle_conns.py)
#   rounds       ROUNDS pairs of saturation runs, nginx and the gateway back to back (plain,
#                then TLS): each pair's req/s and CPU per request, and the median ratio
#   route change PATCH a route to a second endpoint (a second upstream answering another body)
#                and poll the gateway until the answer is the new upstream's, $ROUTE_ROUNDS
#                times (scripts/bench/route_switch.py)
# Prints the conditions and one Markdown table at the end (progress goes to stderr).
#
#   scripts/gateway-bench.sh                 # 64 connections, 10 s each, release build
#   CONNS=16 SECONDS_EACH=5 scripts/gateway-bench.sh
#   RATE=2000 IDLE_CONNS=10000 ROUTE_ROUNDS=20 scripts/gateway-bench.sh
#   SKIP_BUILD=1 scripts/gateway-bench.sh    # use the existing target/release/switchyard
#   SKIP_BUILD=1 BIN=path/to/switchyard scripts/gateway-bench.sh   # or that binary
#   TOKIO_WORKER_THREADS=1 scripts/gateway-bench.sh  # one runtime thread, one nginx worker
#   SAME_SESSION=1 scripts/gateway-bench.sh  # the server in wrk's session, not its own (below)
#   ROUNDS=7 scripts/gateway-bench.sh       # 7 alternating saturation pairs per listener, not 5
#   PROFILE=perf.txt scripts/gateway-bench.sh  # also: where the gateway's CPU goes (perf),
#                                              # plain in perf.txt, TLS in perf-tls.txt,
#                                              # plain nginx's in perf-nginx.txt
#   PROFILE=perf.txt PERF_RECORD_ARGS="--call-graph dwarf" PERF_DATA=/tmp/gw.data \
#     scripts/gateway-bench.sh                 # with call graphs, perf.data kept
set -euo pipefail
cd "$(dirname "$0")/.."

CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
SECONDS_EACH=${SECONDS_EACH:-10}
RATE=${RATE:-3000}
PACED_CONNS=${PACED_CONNS:-32}
# Alternating saturation rounds, nginx against the gateway (plain, then TLS): on a machine
# whose cores wrk, the upstream and the proxy share, one run of each moves by ±10 % from run to
# run; the median of ROUNDS pairs, each pair run back to back (order swapped every round),
# says more than one. 0 leaves them out.
ROUNDS=${ROUNDS:-5}
IDLE_CONNS=${IDLE_CONNS:-10000}
ROUTE_ROUNDS=${ROUTE_ROUNDS:-20}
UP_PORT=${UP_PORT:-18081}
NGINX_PORT=${NGINX_PORT:-18082}
SY_PORT=${SY_PORT:-18083}
UP2_PORT=${UP2_PORT:-18084}
UP_TLS_PORT=${UP_TLS_PORT:-18085}
NGINX_TLS_PORT=${NGINX_TLS_PORT:-18086}
GW_PORTS=${GW_PORTS:-18090-18099}
# The gateway serves plain HTTP on the server's tokio runtime (TOKIO_WORKER_THREADS threads,
# else one per core) and TLS on as many per-core runtimes. nginx gets as many worker processes.
WORKERS=${TOKIO_WORKER_THREADS:-$(nproc)}
# Idle upstream connections each nginx worker keeps (the gateway keeps up to 256 per instance
# for 60 s): at least the connections wrk opens, so that neither proxy reconnects.
KEEPALIVE=${KEEPALIVE:-128}
[ "$KEEPALIVE" -ge "$CONNS" ] || KEEPALIVE=$CONNS

need=()
command -v wrk >/dev/null || need+=(wrk)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
command -v jq >/dev/null || need+=(jq)
command -v curl >/dev/null || need+=(curl)
command -v openssl >/dev/null || need+=(openssl)
command -v python3 >/dev/null || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

if [ -z "${SKIP_BUILD:-}" ]; then
  cargo build --release -p switchyard --bin switchyard
fi
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release/switchyard}

# 10,000 connections need as many descriptors in the client and in each proxy (inherited).
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
NOFILE=$(ulimit -n)
if [ "$NOFILE" != unlimited ] && [ "$IDLE_CONNS" -gt $((NOFILE - 1000)) ]; then
  echo "ulimit -n is $NOFILE: holding $((NOFILE - 1000)) idle connections, not $IDLE_CONNS" >&2
  IDLE_CONNS=$((NOFILE - 1000))
fi
[ "$NOFILE" != unlimited ] || NOFILE=65536
NGINX_CONNS=$((IDLE_CONNS + 2 * KEEPALIVE + 1024))

say() { echo "== $(date +%T) $*" >&2; }

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
WORK=$(mktemp -d)
pids=()
SY_PID=""
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for f in up px pxs; do
    if [ -f "$WORK/$f.pid" ]; then kill "$(cat "$WORK/$f.pid")" 2>/dev/null || true; fi
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

# One certificate for every TLS listener (the upstream's, nginx's, the gateway's): P-256, as
# the gateway's own self-signed ones; in the gateway's folder as TENANT-GATEWAY.crt/.key.
# nginx 1.22 offers TLS 1.3 only when told (ssl_protocols); rustls offers 1.2 and 1.3.
mkdir -p "$WORK/tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
  -keyout "$WORK/tls/acme-bench.key" -out "$WORK/tls/acme-bench.crt" 2>/dev/null
CRT=$WORK/tls/acme-bench.crt
KEY=$WORK/tls/acme-bench.key

BODY1='{"id":"cmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}'
BODY2=${BODY1/cmpl-1/cmpl-2}
# The upstream: one nginx worker answering a chat-completion-sized JSON body, plain and TLS;
# the second upstream (the route change's) answers the same with another id.
cat >"$WORK/up.conf" <<EOF
worker_processes 1;
worker_rlimit_nofile $NOFILE;
daemon on;
pid $WORK/up.pid;
error_log $WORK/up-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  keepalive_timeout 60s;
  default_type application/json;
  server {
    listen 127.0.0.1:$UP_PORT;
    listen 127.0.0.1:$UP_TLS_PORT ssl;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_certificate $CRT;
    ssl_certificate_key $KEY;
    location / { return 200 '$BODY1'; }
  }
  server {
    listen 127.0.0.1:$UP2_PORT;
    location / { return 200 '$BODY2'; }
  }
}
EOF
# nginx as the reverse proxy, plain (px) and TLS (pxs) in two instances (each measured fresh
# for memory): WORKERS workers, a keep-alive pool of KEEPALIVE idle connections per worker.
proxy_conf() { # NAME LISTEN-DIRECTIVE
  cat <<EOF
worker_processes $WORKERS;
worker_rlimit_nofile $NOFILE;
daemon on;
pid $WORK/$1.pid;
error_log $WORK/$1-error.log;
events { worker_connections $NGINX_CONNS; }
http {
  access_log off;
  keepalive_requests 1000000;
  keepalive_timeout 60s;
  upstream up {
    server 127.0.0.1:$UP_PORT;
    keepalive $KEEPALIVE;
    keepalive_requests 1000000;
    keepalive_timeout 60s;
  }
  server {
    $2
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_certificate $CRT;
    ssl_certificate_key $KEY;
    location / {
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
EOF
}
proxy_conf px "listen 127.0.0.1:$NGINX_PORT;" >"$WORK/px.conf"
proxy_conf pxs "listen 127.0.0.1:$NGINX_TLS_PORT ssl;" >"$WORK/pxs.conf"
for c in up px pxs; do "$NGINX" -c "$WORK/$c.conf" -p "$WORK"; done
for _ in $(seq 1 50); do
  [ -s "$WORK/px.pid" ] && [ -s "$WORK/pxs.pid" ] && [ -s "$WORK/up.pid" ] && break
  sleep 0.1
done
curl -fsS -o /dev/null "http://127.0.0.1:$NGINX_PORT/"
curl -fsSk -o /dev/null "https://127.0.0.1:$NGINX_TLS_PORT/"

# Switchyard with the demo data, plain HTTP gateways or TLS ones (a process-wide setting).
# In a session of its own, as each nginx is (`daemon on` calls setsid): with the kernel's
# autogroup scheduling (kernel.sched_autogroup_enabled), each session shares the CPU as one
# group, and a proxy left in the session of wrk (this script's) competes with wrk for one
# group's share while nginx gets a share of its own. SAME_SESSION=1 leaves the gateway in this
# script's session (how runs before 2026-12-07 16:00 UTC started it).
SESSION=(setsid)
[ -n "${SAME_SESSION:-}" ] && SESSION=()
start_server() { # plain|tls
  local mode=(--gateway-plain-http)
  [ "$1" = tls ] && mode=(--gateway-tls-dir "$WORK/tls")
  "${SESSION[@]}" "$BIN" serve --demo --log-format text --listen "127.0.0.1:$SY_PORT" "${mode[@]}" \
    --database-url "sqlite://$WORK/bench.db?mode=rwc" --gateway-ports "$GW_PORTS" \
    >>"$WORK/switchyard-$1.log" 2>&1 &
  SY_PID=$!
  pids+=("$SY_PID")
  # setsid runs the server in its place (this shell's background job leads no group), so
  # $! is the server; checked, as every figure below is read off that pid.
  if [ ${#SESSION[@]} -gt 0 ] && [ "$(ps -o sid= -p "$SY_PID" | tr -d ' ')" != "$SY_PID" ]; then
    sleep 0.2
    [ "$(ps -o sid= -p "$SY_PID" | tr -d ' ')" = "$SY_PID" ] || { echo "the server is not in a session of its own" >&2; exit 1; }
  fi
  for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$SY_PORT/readyz" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "switchyard did not start:" >&2
  tail -20 "$WORK/switchyard-$1.log" >&2
  exit 1
}
stop_server() {
  kill "$SY_PID" 2>/dev/null || true
  for _ in $(seq 1 100); do
    kill -0 "$SY_PID" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$SY_PID" 2>/dev/null || true
  wait "$SY_PID" 2>/dev/null || true
}
API="http://127.0.0.1:$SY_PORT/api/v1"
login() {
  TOKEN=$(curl -fsS "$API/auth/login" -H 'content-type: application/json' \
    -d '{"tenant":"acme","username":"alice","password":"switchyard-demo"}' | jq -r .token)
  auth=(-H "authorization: Bearer $TOKEN" -H 'content-type: application/json')
}
wait_gateway() { # URL
  for _ in $(seq 1 100); do
    curl -fsSk -o /dev/null "$1/v1/chat/completions" -H "authorization: Bearer $GTOKEN" && return 0
    sleep 0.1
  done
  echo "the gateway does not answer at $1" >&2
  exit 1
}

say "switchyard, plain HTTP gateways"
start_server plain
login
# An endpoint on the upstream, a second one on the second upstream, a gateway, a route, a
# gateway token.
PROJECT=$(curl -fsS "$API/projects" "${auth[@]}" | jq -r '.items[0].id')
EP=$(curl -fsS "$API/endpoints" "${auth[@]}" \
  -d "{\"project_id\":\"$PROJECT\",\"name\":\"bench\",\"targets\":[\"127.0.0.1:$UP_PORT\"]}" | jq -r .id)
EP2=$(curl -fsS "$API/endpoints" "${auth[@]}" \
  -d "{\"project_id\":\"$PROJECT\",\"name\":\"bench-b\",\"targets\":[\"127.0.0.1:$UP2_PORT\"]}" | jq -r .id)
GW_JSON=$(curl -fsS "$API/gateways" "${auth[@]}" -d '{"name":"bench"}')
GW=$(jq -r .id <<<"$GW_JSON")
GW_PORT=$(jq -r .port <<<"$GW_JSON")
ROUTE=$(curl -fsS "$API/routes" "${auth[@]}" \
  -d "{\"gateway_id\":\"$GW\",\"path_prefix\":\"/\",\"endpoint_id\":\"$EP\"}" | jq -r .id)
GTOKEN=$(curl -fsS "$API/gateways/$GW/tokens" "${auth[@]}" -d '{"name":"bench"}' | jq -r .token)
GW_HTTP="http://127.0.0.1:$GW_PORT"
GW_HTTPS="https://127.0.0.1:$GW_PORT"
wait_gateway "$GW_HTTP"

PATH_=/v1/chat/completions
GWAUTH="authorization: Bearer $GTOKEN"
declare -A S_RPS S_P50 S_P99 S_CPU S_SW S_ERR P_RPS P_P50 P_P99 P_ERR IDLE IDLE_RSS ROUTE_MS ROUTE_RES

# wrk's latencies (123.45us, 1.20ms, 1.02s) in milliseconds (3 decimals under 1 ms).
ms() {
  awk -v v="$1" 'BEGIN {
    if (v == "") { print ""; exit }
    n = v + 0
    if (v ~ /us$/) n /= 1000
    else if (v ~ /ms$/) n = n
    else if (v ~ /m$/) n *= 60000
    else if (v ~ /s$/) n *= 1000
    f = n < 1 ? "%.3f" : "%.2f"; printf f, n
  }'
}
# CPU time (user + system, clock ticks) of a process and its children so far.
cpu_ticks() { # PID
  local t=0 p
  for p in "$1" $(pgrep -P "$1" || true); do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo "$t"
}
# Context switches (voluntary and not) of a process, its children and all their threads.
ctx_switches() { # PID
  local t=0 p
  for p in "$1" $(pgrep -P "$1" || true); do
    t=$((t + $(cat /proc/"$p"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s + 0}')))
  done
  echo "$t"
}
# The process whose CPU a target's requests cost: the proxy (direct: the upstream).
pid_of() { # NAME
  case $1 in
    direct | direct-tls) master_of up ;;
    nginx) master_of px ;;
    nginx-tls) master_of pxs ;;
    *) echo "$SY_PID" ;;
  esac
}
# CPU µs per request: CPU ticks spent over a SECONDS_EACH run at REQ/S (empty without requests).
us_per_request() { # TICKS REQ/S
  awk -v t="$1" -v hz="$(getconf CLK_TCK)" -v r="$2" -v s="$SECONDS_EACH" \
    'BEGIN { if (r > 0) printf "%.1f", t / hz * 1e6 / (r * s) }'
}
# wrk against a target: saturation (as fast as it goes) or paced (RATE requests/s in all).
# Saturation also gives the proxy's CPU time per request (µs): what a request costs it,
# whatever share of the cores the host's other work left it.
bench() { # saturation|paced NAME URL [wrk args]
  local kind=$1 name=$2 url=$3; shift 3
  local out pid ticks0 switches0
  pid=$(pid_of "$name")
  ticks0=$(cpu_ticks "$pid"); switches0=$(ctx_switches "$pid")
  if [ "$kind" = paced ]; then
    say "paced $name ($RATE req/s)"
    out=$(wrk -t"$THREADS" -c"$PACED_CONNS" -d"${SECONDS_EACH}s" --latency \
      -s scripts/bench/paced.lua "$@" "$url" -- "$RATE" "$THREADS")
  else
    say "saturation $name"
    out=$(wrk -t"$THREADS" -c"$CONNS" -d"${SECONDS_EACH}s" --latency "$@" "$url")
  fi
  local rps p50 p99 errors
  rps=$(awk '/Requests\/sec/ {printf "%.0f", $2}' <<<"$out")
  p50=$(ms "$(awk '$1=="50%" {print $2}' <<<"$out")")
  p99=$(ms "$(awk '$1=="99%" {print $2}' <<<"$out")")
  errors=$(awk '/Non-2xx|Socket errors/ {print}' <<<"$out" | tr '\n' ' ' | sed 's/ *$//')
  if [ "$kind" = paced ]; then
    P_RPS[$name]=$rps; P_P50[$name]=$p50; P_P99[$name]=$p99; P_ERR[$name]=$errors
  else
    S_RPS[$name]=$rps; S_P50[$name]=$p50; S_P99[$name]=$p99; S_ERR[$name]=$errors
    S_CPU[$name]=$(us_per_request $(($(cpu_ticks "$pid") - ticks0)) "$rps")
    S_SW[$name]=$(awk -v n="$(($(ctx_switches "$pid") - switches0))" -v r="$rps" -v s="$SECONDS_EACH" \
      'BEGIN { if (r > 0) printf "%.2f", n / (r * s) }')
  fi
}
# One saturation run: "req/s CPU-µs-per-request failed-lines" (wrk's Non-2xx / socket errors).
sat() { # PID URL [wrk args]
  local pid=$1 url=$2; shift 2
  local t0 out rps errs cpu
  t0=$(cpu_ticks "$pid")
  out=$(wrk -t"$THREADS" -c"$CONNS" -d"${SECONDS_EACH}s" "$@" "$url")
  rps=$(awk '/Requests\/sec/ {printf "%.0f", $2}' <<<"$out")
  errs=$(grep -cE 'Non-2xx|Socket errors' <<<"$out" || true)
  cpu=$(us_per_request $(($(cpu_ticks "$pid") - t0)) "${rps:-0}")
  echo "${rps:-0} ${cpu:-0} $errs"
}
# ROUNDS pairs of saturation runs, nginx's and the gateway's, back to back, the order swapped
# every round. Lines "LABEL ROUND nginx(req/s µs errs) gateway(req/s µs errs)" in ALT.
ALT=()
alternate() { # LABEL NGINX-NAME NGINX-URL GATEWAY-URL [gateway's wrk args]
  local label=$1 nname=$2 nurl=$3 gurl=$4; shift 4
  local i a b
  for i in $(seq 1 "$ROUNDS"); do
    say "alternating $label: round $i of $ROUNDS"
    if [ $((i % 2)) -eq 1 ]; then
      a=$(sat "$(pid_of "$nname")" "$nurl"); b=$(sat "$SY_PID" "$gurl" "$@")
    else
      b=$(sat "$SY_PID" "$gurl" "$@"); a=$(sat "$(pid_of "$nname")" "$nurl")
    fi
    ALT+=("$label $i $a $b")
  done
}
# Memory per 10,000 idle keep-alive connections to a proxy (its processes' RSS).
idle() { # NAME URL PID [idle_conns.py args]
  local name=$1 url=$2 pid=$3; shift 3
  say "idle connections: $IDLE_CONNS to $name"
  local out
  out=$(python3 scripts/bench/idle_conns.py --url "$url" --count "$IDLE_CONNS" --pid "$pid" "$@")
  IDLE[$name]=$(printf '%.1f' "$(jq -r '.mib_per_10k' <<<"$out")")
  IDLE_RSS[$name]=$(jq -r '"\(.rss_before_kib / 1024 | floor) → \(.rss_holding_kib / 1024 | floor) MiB, \(.open) held" + (if .rss_settled then "" else ", not settled" end) + (if .failed > 0 or .closed_by_peer > 0 then ", \(.failed) failed, \(.closed_by_peer) closed by it" else "" end)' <<<"$out")
  echo "$out" >"$WORK/idle-$name.json"
}
route_change() { # NAME GATEWAY-URL
  say "route change: $ROUTE_ROUNDS rounds through $1"
  local out
  out=$(python3 scripts/bench/route_switch.py --api "$API" --token "$TOKEN" --route "$ROUTE" \
    --endpoint "$EP=cmpl-1" --endpoint "$EP2=cmpl-2" --gateway "$2$PATH_" \
    --gateway-token "$GTOKEN" --rounds "$ROUTE_ROUNDS")
  echo "$out" >"$WORK/route-$1.json"
  ROUTE_MS[$1]=$(jq -r '"\(.median_from_answer_ms) / \(.max_from_answer_ms)"' <<<"$out")
  ROUTE_RES[$1]=$(jq -r '"from the PATCH send \(.median_from_send_ms) / \(.max_from_send_ms) ms (median / max), the PATCH itself \(.median_patch_ms) ms, one poll \(.median_poll_ms) ms (medians); \(.stale_polls) answers from the old upstream, \(.error_polls) errors"' <<<"$out")
}
profile_start() { # [PIDS, comma-separated; the server's by default]
  [ -n "${PROFILE:-}" ] || return 0
  # PERF_RECORD_ARGS (e.g. --call-graph dwarf) go to perf record; PERF_DATA keeps the data.
  # shellcheck disable=SC2086
  perf record -F 999 ${PERF_RECORD_ARGS:-} -p "${1:-$SY_PID}" -o "$WORK/perf.data" -- sleep "$SECONDS_EACH" >/dev/null 2>&1 &
  perf_pid=$!
}
profile_end() { # OUTPUT
  [ -n "${PROFILE:-}" ] || return 0
  wait "$perf_pid" || true
  [ -z "${PERF_DATA:-}" ] || cp "$WORK/perf.data" "${PERF_DATA}.$(basename "$1" .txt)"
  { perf report -i "$WORK/perf.data" --no-children --sort dso --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | head -8; perf report -i "$WORK/perf.data" --no-children --sort dso,symbol --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | sed "s/  */ /g" | head -80; } >"$1" || true # head closes the pipe early
}
master_of() { cat "$WORK/$1.pid"; }

# Plain HTTP. Memory first, on processes that have served nothing but a few requests.
idle nginx "http://127.0.0.1:$NGINX_PORT$PATH_" "$(master_of px)" --children
idle gateway "$GW_HTTP$PATH_" "$SY_PID" --header "$GWAUTH"
bench saturation direct "http://127.0.0.1:$UP_PORT$PATH_"
profile_start "$(master_of px),$(pgrep -d, -P "$(master_of px)")"
bench saturation nginx "http://127.0.0.1:$NGINX_PORT$PATH_"
NGINX_PROFILE=${PROFILE:-}
profile_end "${NGINX_PROFILE%.txt}-nginx.txt"
profile_start
bench saturation gateway "$GW_HTTP$PATH_" -H "$GWAUTH"
profile_end "${PROFILE:-}"
bench saturation gateway-session "$GW_HTTP$PATH_" -H "$GWAUTH" -H "x-session-id: user-42"
bench paced direct "http://127.0.0.1:$UP_PORT$PATH_"
bench paced nginx "http://127.0.0.1:$NGINX_PORT$PATH_"
bench paced gateway "$GW_HTTP$PATH_" -H "$GWAUTH"
bench paced gateway-session "$GW_HTTP$PATH_" -H "$GWAUTH" -H "x-session-id: user-42"
alternate plain nginx "http://127.0.0.1:$NGINX_PORT$PATH_" "$GW_HTTP$PATH_" -H "$GWAUTH"
route_change gateway "$GW_HTTP"
stop_server

# TLS: the same database, the gateway now with the run's certificate.
say "switchyard, TLS gateways"
start_server tls
login
wait_gateway "$GW_HTTPS"
tls_of() { # PORT
  openssl s_client -connect "127.0.0.1:$1" </dev/null 2>/dev/null |
    awk '/^New, / {print $2 " " $NF; exit}'
}
TLS_NGINX=$(tls_of "$NGINX_TLS_PORT")
TLS_GW=$(tls_of "$GW_PORT")
GW_CERT_OURS=no
openssl s_client -connect "127.0.0.1:$GW_PORT" </dev/null 2>/dev/null |
  openssl x509 -noout -fingerprint 2>/dev/null | grep -qF "$(openssl x509 -in "$CRT" -noout -fingerprint)" &&
  GW_CERT_OURS=yes
idle nginx-tls "https://127.0.0.1:$NGINX_TLS_PORT$PATH_" "$(master_of pxs)" --children
idle gateway-tls "$GW_HTTPS$PATH_" "$SY_PID" --header "$GWAUTH"
bench saturation direct-tls "https://127.0.0.1:$UP_TLS_PORT$PATH_"
bench saturation nginx-tls "https://127.0.0.1:$NGINX_TLS_PORT$PATH_"
profile_start
bench saturation gateway-tls "$GW_HTTPS$PATH_" -H "$GWAUTH"
[ -z "${PROFILE:-}" ] || profile_end "${PROFILE%.txt}-tls.txt"
bench paced direct-tls "https://127.0.0.1:$UP_TLS_PORT$PATH_"
bench paced nginx-tls "https://127.0.0.1:$NGINX_TLS_PORT$PATH_"
bench paced gateway-tls "$GW_HTTPS$PATH_" -H "$GWAUTH"
alternate tls nginx-tls "https://127.0.0.1:$NGINX_TLS_PORT$PATH_" "$GW_HTTPS$PATH_" -H "$GWAUTH"
route_change gateway-tls "$GW_HTTPS"
stop_server

# The table.
added() { # P99 BASE-P99
  if [ -z "$1" ] || [ -z "$2" ]; then echo "—"; return; fi
  awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; f = d < 1 && d > -1 ? "%+.3f" : "%+.2f"; printf f, d }'
}
fmt_rps() { # 12345 → 12,345
  if [ -n "${1:-}" ]; then sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"$1"; else echo "—"; fi
}
cpu=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
echo
echo "Conditions: $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- server app 2>/dev/null || echo ' (with uncommitted changes)'),"
echo "load average $LOAD_START at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end;"
echo "$(nproc) cores ($cpu), Linux $(uname -r); wrk $(wrk -v 2>&1 | awk 'NR==1 {print $2}'), $("$NGINX" -v 2>&1 | sed 's/.*version: //'), $(openssl version | awk '{print $1, $2}')."
echo "All on 127.0.0.1, HTTP/1.1 keep-alive (client side: 60 s, unlimited requests). Upstream: one nginx worker,"
echo "a ${#BODY1}-byte JSON body. nginx: $WORKERS worker processes = the gateway's runtime threads"
echo "(TOKIO_WORKER_THREADS=${TOKIO_WORKER_THREADS:-unset: one per core}); upstream keep-alive pool: nginx $KEEPALIVE idle"
echo "per worker, unlimited requests, 60 s; the gateway: up to 256 idle connections per instance, 60 s."
echo "TLS: one self-signed P-256 certificate for the upstream's, nginx's and the gateway's listeners"
echo "(the gateway's from --gateway-tls-dir: $GW_CERT_OURS); negotiated with nginx: ${TLS_NGINX:-?}, with the gateway: ${TLS_GW:-?}."
echo "Saturation: wrk -t$THREADS -c$CONNS -d${SECONDS_EACH}s. Paced: wrk -t$THREADS -c$PACED_CONNS -d${SECONDS_EACH}s -s scripts/bench/paced.lua at $RATE req/s."
echo "CPU µs per request: the proxy's user + system time over its saturation run (/proc, master and workers for nginx,"
echo "the whole server for the gateway), divided by the requests wrk counted; direct: the upstream's. Switches per request:"
echo "the same processes' context switches (voluntary and involuntary, all threads, /proc) over that run, likewise divided."
echo "Idle: $IDLE_CONNS connections, one request each, held ≥ 3 s; RSS of the proxy's processes (the gateway: the whole server),"
echo "before and while holding, each once still (within 1 % over 2 s); on fresh processes, before any wrk run;"
echo "nginx's worker_connections ($NGINX_CONNS per worker) are allocated at its start, so in its 'before'."
echo "The gateway: token auth, group access (RBAC), bounded-load hashing, metrics and usage metering on every request."
echo "Scheduling: autogroup $(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || echo '?'); each nginx in a session of its own (daemon on); the server $([ ${#SESSION[@]} -gt 0 ] && echo 'in a session of its own (setsid)' || echo "in wrk's session (SAME_SESSION=1)")."
echo
echo "| target | saturation req/s | p50 ms | p99 ms | CPU µs per request | switches per request | paced req/s (of $RATE) | p50 ms | p99 ms | p99 added to direct's, ms | MiB per 10k idle conns (RSS before → holding) | route change ms, median / max | errors |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
for t in direct nginx gateway gateway-session direct-tls nginx-tls gateway-tls; do
  add=$(added "${P_P99[$t]:-}" "${P_P99[direct]:-}")
  case $t in
    direct) add="—" ;;
    *-tls) [ "$t" = direct-tls ] || add="$add (to direct-tls's: $(added "${P_P99[$t]:-}" "${P_P99[direct-tls]:-}"))" ;;
  esac
  mem="—"
  [ -z "${IDLE[$t]:-}" ] || mem="${IDLE[$t]} (${IDLE_RSS[$t]})"
  errs="${S_ERR[$t]:-}${S_ERR[$t]:+; }${P_ERR[$t]:-}"
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$t" \
    "$(fmt_rps "${S_RPS[$t]:-}")" "${S_P50[$t]:-—}" "${S_P99[$t]:-—}" "${S_CPU[$t]:-—}" "${S_SW[$t]:-—}" \
    "$(fmt_rps "${P_RPS[$t]:-}")" "${P_P50[$t]:-—}" "${P_P99[$t]:-—}" "$add" "$mem" \
    "${ROUTE_MS[$t]:-—}" "${errs:-none}"
done
echo
echo "Route change: PATCH /routes/{id} to the other endpoint (another upstream), then GET through the"
echo "gateway on one keep-alive connection until the new upstream answers; $ROUTE_ROUNDS rounds, times from"
echo "the PATCH's answer (every one includes a poll's round trip)."
for t in gateway gateway-tls; do
  [ -z "${ROUTE_RES[$t]:-}" ] || echo "$t: ${ROUTE_RES[$t]}"
done
if [ ${#ALT[@]} -gt 0 ]; then
  echo
  echo "Alternating saturation rounds (wrk -t$THREADS -c$CONNS -d${SECONDS_EACH}s each; nginx first in odd rounds, the gateway first in even ones):"
  echo
  echo "| listener | round | nginx req/s | gateway req/s | of nginx's | CPU µs per request, nginx / gateway | failed |"
  echo "|---|---:|---:|---:|---:|---:|---|"
  for l in "${ALT[@]}"; do
    read -r label i nr nc ne gr gc ge <<<"$l"
    printf '| %s | %s | %s | %s | %s %% | %s / %s | %s |\n' "$label" "$i" "$(fmt_rps "$nr")" "$(fmt_rps "$gr")" \
      "$(awk -v g="$gr" -v n="$nr" 'BEGIN { printf "%.0f", (n > 0 ? 100 * g / n : 0) }')" "$nc" "$gc" \
      "$([ "$ne$ge" = 00 ] && echo none || echo "nginx $ne, gateway $ge lines")"
  done
  echo
  for label in plain tls; do
    printf '%s\n' "${ALT[@]}" | awk -v L="$label" '$1 == L {
        n++; r[n] = ($3 > 0 ? $6 / $3 : 0); sn += $3; sg += $6; cn += $4; cg += $7 }
      END {
        if (!n) exit
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (r[j] < r[i]) { t = r[i]; r[i] = r[j]; r[j] = t }
        med = (n % 2 ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2)
        printf "%s: the gateway at %.0f %% of nginx'"'"'s requests/s, median of %d rounds (%.0f–%.0f %%); over all rounds %.0f %%; CPU per request %.2f× nginx'"'"'s (means %.1f / %.1f µs)\n",
          L, 100 * med, n, 100 * r[1], 100 * r[n], 100 * sg / sn, cg / cn, cn / n, cg / n }'
  done
fi
