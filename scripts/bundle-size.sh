#!/usr/bin/env bash
# Builds the release front end as scripts/run.sh does (`cargo leptos build --release
# --precompress --split`, here `--frontend-only`: the server binary does not change the bundle,
# then gzip -9 copies) and prints what a browser downloads from /pkg/ for each page: the shell
# every page loads, plus the chunks of the page's lazy route (scripts/bundle-size.mjs; raw,
# gzip -9 and brotli 11). `--no-build` measures the site as it is. LEPTOS_SITE_ROOT (default
# target/site) names another site root.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"
if [ "${1:-}" != "--no-build" ]; then
  ./scripts/bootstrap.sh
  cargo leptos build --release --precompress --split --frontend-only
  find "${LEPTOS_SITE_ROOT:-target/site}" -type f ! -name '*.br' ! -name '*.gz' -exec gzip -9 -n -k -f {} +
fi
# What each page downloads (the shell plus its lazy route's chunks), raw, gzip -9, brotli 11.
node scripts/bundle-size.mjs "${LEPTOS_SITE_ROOT:-target/site}"
pkg="${LEPTOS_SITE_ROOT:-target/site}/pkg"
missing=0
for f in "$pkg"/*.wasm "$pkg"/*.js "$pkg"/*.css; do
  [ -f "$f.br" ] && [ -f "$f.gz" ] || missing=1
done
if [ "$missing" = 1 ]; then
  echo "some files have no precompressed copies (a debug build, or a build without --precompress)" >&2
fi
