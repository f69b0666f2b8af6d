#!/usr/bin/env bash
# Builds and runs Switchyard on the embedded default: a SQLite file under ./data/, seeded with a
# demo platform on first start. Extra arguments go to `switchyard serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"
cargo leptos build
exec target/debug/switchyard serve --demo --log-format text "$@"
