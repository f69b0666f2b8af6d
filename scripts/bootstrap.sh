#!/usr/bin/env bash
# Installs everything the build and the tests need on a fresh Debian machine,
# skipping whatever is already present. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_LEPTOS_VERSION=0.3.10
# Must equal the wasm-bindgen version in Cargo.lock, or hydration breaks.
WASM_BINDGEN_VERSION=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/version = |"/,""); print; exit}' Cargo.lock 2>/dev/null || true)
WASM_BINDGEN_VERSION=${WASM_BINDGEN_VERSION:-0.2.130}

log() { printf '[bootstrap] %s\n' "$*"; }
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
command -v pg_isready >/dev/null 2>&1 || need_apt+=(postgresql-client)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
# Local jobs run with a plain PATH (no pyenv): the serving-job test runs /usr/bin/python3.
[ -x /usr/bin/python3 ] || need_apt+=(python3)
# SAML: samael links libxmlsec1 (bindgen needs libclang); xmlsec1 checks the test IdP's signatures.
command -v xmlsec1 >/dev/null 2>&1 || need_apt+=(xmlsec1)
pkg-config --exists xmlsec1 2>/dev/null || need_apt+=(libxmlsec1-dev libxml2-dev)
ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1 || need_apt+=(libclang-dev clang)
if [ ${#need_apt[@]} -gt 0 ]; then
  log "apt-get install ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# OpenLDAP's slapd for the LDAP sign-in tests (started per test by end2end/idp/ldap.sh).
bash end2end/idp/ldap.sh install

if ! rustup target list --installed | grep -q wasm32-unknown-unknown; then
  log "rustup target add wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi

if ! cargo leptos --version 2>/dev/null | grep -q "$CARGO_LEPTOS_VERSION"; then
  log "cargo install cargo-leptos $CARGO_LEPTOS_VERSION (takes ~18 min on 2 cores)"
  cargo install cargo-leptos --version "$CARGO_LEPTOS_VERSION" --locked
fi

if ! wasm-bindgen --version 2>/dev/null | grep -q "$WASM_BINDGEN_VERSION"; then
  log "cargo install wasm-bindgen-cli $WASM_BINDGEN_VERSION"
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --force
fi

if [ -f package-lock.json ]; then
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    log "npm ci"
    npm ci --no-audit --no-fund --loglevel=error
  fi
fi
mkdir -p public
if [ -f node_modules/echarts/dist/echarts.min.js ] && [ ! -f public/echarts.min.js ]; then
  cp node_modules/echarts/dist/echarts.min.js public/echarts.min.js
fi
# scim2-tester, the independent SCIM checker scripts/test.sh runs (scripts/scim-conformance.sh).
if ! python3 -m pip show scim2-tester 2>/dev/null | grep -qx 'Version: 0.5.2'; then
  if ! python3 -m pip --version >/dev/null 2>&1; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-pip >/dev/null
  fi
  log "pip install scim2-tester 0.5.2"
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q "scim2-tester[httpx2]==0.5.2" scim2-client==0.13.2 scim2-models==0.12.3 httpx2==2.16.2
fi
log "ready"
