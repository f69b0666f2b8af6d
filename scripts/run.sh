#!/usr/bin/env bash
# Builds and runs Switchyard on the embedded default: a SQLite file under ./data/, seeded with a
# demo platform on first start. Extra arguments go to `switchyard serve`.
#
# The build is the release one (a small, optimised WebAssembly bundle, precompressed with brotli
# and gzip, under content-hashed names). SWITCHYARD_DEBUG_BUILD=1 builds and runs the debug build
# instead: it compiles faster, but its bundle is many times larger and not precompressed.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"
if [ "${SWITCHYARD_DEBUG_BUILD:-0}" = 1 ]; then
  profile=debug
  cargo leptos build --split
else
  profile=release
  cargo leptos build --release --precompress --split
  # cargo-leptos's gzip copies are larger than gzip -9's (browsers on plain http get no brotli).
  find target/site -type f ! -name '*.br' ! -name '*.gz' -exec gzip -9 -n -k -f {} +
fi
exec "${CARGO_TARGET_DIR:-target}/$profile/switchyard" serve --demo --log-format text "$@"
