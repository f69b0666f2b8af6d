#!/usr/bin/env bash
# Runs every test: unit, integration (SQLite and PostgreSQL) and end-to-end in Chromium.
# Installs what is missing first (scripts/bootstrap.sh). Screenshots: end2end/screenshots/.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"
export SWITCHYARD_TEST_POSTGRES="${SWITCHYARD_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/test}"

# PostgreSQL runs on the development and CI machines; start it if it is down.
if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    echo "[test] starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
    for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
  fi
fi

echo "[test] building the site and the server (debug; the same build serves the browser tests)"
cargo leptos build --split

# Per package: `--workspace` would unify app's ssr and hydrate features into one build.
log=$(mktemp)
applog=$(mktemp); unitlog=$(mktemp); suitelog=$(mktemp)
echo "[test] unit tests: app"
cargo test -p app 2>&1 | tee "$applog"
echo "[test] unit tests: server"
cargo test -p switchyard --lib --bins 2>&1 | tee "$unitlog"
echo "[test] integration tests: server (each on SQLite and on PostgreSQL)"
cargo test -p switchyard --test suite 2>&1 | tee "$suitelog"
# Type-checked only: an optimised build of every dependency would double the run's time, and
# the benchmarks are built in release by whoever runs them (`cargo bench`).
echo "[test] benchmarks compile (cargo check --benches)"
cargo check -p switchyard --benches
cat "$applog" "$unitlog" "$suitelog" >>"$log"

echo "[test] end-to-end tests in Chromium"
work=$(mktemp -d)
# A free port of our own, so a server left running elsewhere is never tested by mistake.
port=${SWITCHYARD_E2E_PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
target/debug/switchyard serve --demo --log-format text --allow-private-idp-addresses \
  --listen "127.0.0.1:$port" --database-url "sqlite://$work/e2e.db" >"$work/server.log" 2>&1 &
server=$!
cleanup() { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 1 60); do
  curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  if ! kill -0 "$server" 2>/dev/null; then cat "$work/server.log"; exit 1; fi
  sleep 0.5
done
if ! kill -0 "$server" 2>/dev/null; then echo "[test] the server did not start:"; cat "$work/server.log"; exit 1; fi
echo "[test] SCIM conformance: scim2-tester against the demo server, with acme's SCIM token"
api_token=$(curl -fs "http://127.0.0.1:$port/api/v1/auth/login" -H 'content-type: application/json' -d '{"tenant":"acme","username":"alice","password":"switchyard-demo"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
scim_token=$(curl -fs -X POST "http://127.0.0.1:$port/api/v1/scim/token" -H "authorization: Bearer $api_token" -H 'content-type: application/json' -d '{}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
scripts/scim-conformance.sh "http://127.0.0.1:$port" "$scim_token" 2>&1 | tee -a "$log"
# Real identity providers for the SSO browser tests: npm oidc-provider, a samlify SAML IdP
# and Debian's slapd.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
oidc_port=$(free_port)
OIDC_PORT=$oidc_port \
  OIDC_CLIENTS="[{\"client_id\":\"switchyard\",\"client_secret\":\"switchyard-oidc-secret\",\"redirect_uris\":[\"http://127.0.0.1:$port/auth/oidc/callback\"]}]" \
  OIDC_USERS='[{"sub":"u-olivia","username":"olivia","password":"olivia-pw","email":"olivia@acme.test","name":"Olivia Ops","groups":["ml-research"]}]' \
  node end2end/idp/oidc-provider.mjs >"$work/oidc.log" 2>&1 &
oidc=$!
saml_port=$(free_port)
SAML_PORT=$saml_port \
  SAML_SPS="[{\"entity_id\":\"http://127.0.0.1:$port/auth/saml/acme/corp-saml/metadata\",\"acs_url\":\"http://127.0.0.1:$port/auth/saml/acme/corp-saml/acs\"}]" \
  SAML_USERS='[{"username":"sam","password":"sam-pw","email":"sam@acme.test","name":"Sam Saml","groups":["ml-research"]}]' \
  node end2end/idp/saml-idp.mjs >"$work/saml.log" 2>&1 &
saml=$!
ldap_port=$(free_port)
LDAP_DIR="$work/slapd" bash end2end/idp/ldap.sh start "$ldap_port" >"$work/ldap.log" 2>&1
cleanup() {
  kill "$server" "$oidc" "$saml" 2>/dev/null || true; wait "$server" "$oidc" "$saml" 2>/dev/null || true
  LDAP_DIR="$work/slapd" bash end2end/idp/ldap.sh stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
for p in "$oidc_port" "$saml_port"; do
  for _ in $(seq 1 40); do curl -fs "http://127.0.0.1:$p/__test/health" >/dev/null 2>&1 && break; sleep 0.5; done
done
rm -rf end2end/screenshots
if ! SWITCHYARD_E2E_URL="http://127.0.0.1:$port" SWITCHYARD_E2E_OIDC="http://127.0.0.1:$oidc_port" \
  SWITCHYARD_E2E_SAML="http://127.0.0.1:$saml_port" \
  SWITCHYARD_E2E_LDAP="ldap://127.0.0.1:$ldap_port" node --test --test-concurrency=1 end2end/tests/ 2>&1 | tee -a "$log"; then
  echo "[test] server log:"; tail -50 "$work/server.log"; exit 1
fi
echo "[test] the release build hydrates (built as scripts/run.sh builds it: wasm-opt, precompressed)"
cargo leptos build --release --precompress --split
release_port=$(free_port)
target/release/switchyard serve --demo --log-format text --listen "127.0.0.1:$release_port" \
  --database-url "sqlite://$work/release.db" >"$work/release.log" 2>&1 &
release=$!
for _ in $(seq 1 60); do curl -fs "http://127.0.0.1:$release_port/readyz" >/dev/null 2>&1 && break; sleep 0.5; done
if ! SWITCHYARD_E2E_URL="http://127.0.0.1:$release_port" node end2end/release-smoke.mjs; then
  echo "[test] release server log:"; tail -30 "$work/release.log"; kill "$release" 2>/dev/null || true; exit 1
fi
kill "$release" 2>/dev/null || true; wait "$release" 2>/dev/null || true
echo "[test] screenshots in end2end/screenshots/"
ok_count() { grep -oE 'test result: ok\. [0-9]+ passed' "$1" | grep -oE '[0-9]+' | awk '{s+=$1} END {print s+0}'; }
browser_passed=$(grep -oE '^# pass [0-9]+' "$log" | grep -oE '[0-9]+' | tail -1 || echo 0)
browser_failed=$(grep -oE '^# fail [0-9]+' "$log" | grep -oE '[0-9]+' | tail -1 || echo 0)
echo "[test] counts: app unit $(ok_count "$applog"), server unit $(ok_count "$unitlog"), integration on SQLite $(grep -cE '::sqlite \.\.\. ok$' "$suitelog"), integration on PostgreSQL $(grep -cE '::postgres \.\.\. ok$' "$suitelog"), browser ${browser_passed:-0} passed and ${browser_failed:-0} failed"
rm -f "$applog" "$unitlog" "$suitelog"
rm -f "$log"
