#!/usr/bin/env bash
# Builds the release front end as scripts/run.sh does (`cargo leptos build --release
# --precompress`, here `--frontend-only`: the server binary does not change the bundle, then gzip
# -9 copies) and prints the size of what a browser downloads from /pkg/: raw, gzip -9 and brotli
# (quality 11, through Node's zlib), and the sizes of the precompressed copies the server sends
# (NAME.gz, NAME.br). `--no-build` measures the site as it is. LEPTOS_SITE_ROOT (default
# target/site) names another site root.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"
if [ "${1:-}" != "--no-build" ]; then
  ./scripts/bootstrap.sh
  cargo leptos build --release --precompress --frontend-only
  find "${LEPTOS_SITE_ROOT:-target/site}" -type f ! -name '*.br' ! -name '*.gz' -exec gzip -9 -n -k -f {} +
fi
pkg="${LEPTOS_SITE_ROOT:-target/site}/pkg"
shopt -s nullglob
files=("$pkg"/*.wasm "$pkg"/*.js "$pkg"/*.css)
if [ ${#files[@]} -eq 0 ]; then echo "no files in $pkg: build first" >&2; exit 1; fi
brotli_size() {
  node -e 'const z = require("zlib"), fs = require("fs");
    const b = fs.readFileSync(process.argv[1]);
    process.stdout.write(String(z.brotliCompressSync(b, { params: {
      [z.constants.BROTLI_PARAM_QUALITY]: 11, [z.constants.BROTLI_PARAM_SIZE_HINT]: b.length } }).length));' "$1"
}
size_or_dash() { if [ -f "$1" ]; then stat -c %s "$1"; else echo -; fi; }
printf '%-48s %10s %10s %10s %10s %10s\n' file raw gzip-9 brotli-11 served.gz served.br
missing=0
for f in "${files[@]}"; do
  raw=$(stat -c %s "$f")
  gz=$(gzip -9 -n -c "$f" | wc -c)
  br=$(brotli_size "$f")
  printf '%-48s %10d %10d %10d %10s %10s\n' "$(basename "$f")" "$raw" "$gz" "$br" \
    "$(size_or_dash "$f.gz")" "$(size_or_dash "$f.br")"
  [ -f "$f.br" ] && [ -f "$f.gz" ] || missing=1
done
if [ "$missing" = 1 ]; then
  echo "some files have no precompressed copies (a debug build, or a build without --precompress)" >&2
fi
