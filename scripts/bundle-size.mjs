// Prints what a browser downloads from /pkg/ for each page of a release build made with
// `--split`: the shell every page loads (the app's JavaScript and WebAssembly, the split
// loader, the stylesheet) and, per page, the shell plus the WebAssembly chunks its lazy route
// loads (from __wasm_split_manifest.*.json). Sizes raw, gzip -9 and brotli 11 (Node's zlib),
// summed over the files. `VERBOSE=1` lists every file too.
// Usage: node scripts/bundle-size.mjs [site root, default target/site]
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';

const pkg = path.join(process.argv[2] || 'target/site', 'pkg');
const names = fs.readdirSync(pkg).filter((n) => !n.endsWith('.br') && !n.endsWith('.gz') && !n.endsWith('.ts'));
const sizes = new Map();
for (const n of names) {
  const b = fs.readFileSync(path.join(pkg, n));
  sizes.set(n, {
    raw: b.length,
    gz: zlib.gzipSync(b, { level: 9 }).length,
    br: zlib.brotliCompressSync(b, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 11, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: b.length } }).length,
  });
}
const sum = (files) => files.reduce((a, f) => {
  const s = sizes.get(f);
  if (!s) throw new Error(`not in ${pkg}: ${f}`);
  return { raw: a.raw + s.raw, gz: a.gz + s.gz, br: a.br + s.br, n: a.n + 1 };
}, { raw: 0, gz: 0, br: 0, n: 0 });
const fmt = (n) => n.toLocaleString('en-US');
const row = (what, t) => console.log(`${what.padEnd(28)} ${String(t.n).padStart(6)} ${fmt(t.raw).padStart(11)} ${fmt(t.gz).padStart(10)} ${fmt(t.br).padStart(10)}`);

const shell = names.filter((n) => /^switchyard\.[^.]+\.(js|wasm|css)$|^switchyard(_bg)?\.(js|wasm|css)$|^__wasm_split\..*\.js$/.test(n));
console.log(`${'what'.padEnd(28)} ${'files'.padStart(6)} ${'raw'.padStart(11)} ${'gzip -9'.padStart(10)} ${'brotli 11'.padStart(10)}`);
row('shell (every page)', sum(shell));
const manifestName = names.find((n) => n.startsWith('__wasm_split_manifest'));
if (manifestName) {
  const manifest = JSON.parse(fs.readFileSync(path.join(pkg, manifestName), 'utf8'));
  const pages = Object.entries(manifest).map(([fn, chunks]) => {
    const page = fn.replace(/^__/, '').replace(/_route_view_\d+$/, '');
    return [page, sum(chunks.map((c) => `${c}.wasm`))];
  }).sort((a, b) => b[1].gz - a[1].gz);
  for (const [page, t] of pages) {
    row(`shell + ${page}`, { raw: t.raw + sum(shell).raw, gz: t.gz + sum(shell).gz, br: t.br + sum(shell).br, n: t.n + shell.length });
  }
  row('everything under pkg/', sum(names.filter((n) => !n.endsWith('.json'))));
} else {
  console.log('(no split manifest: a build without --split loads the whole app on every page)');
}
if (process.env.VERBOSE) {
  for (const [n, s] of [...sizes].sort((a, b) => b[1].raw - a[1].raw)) {
    console.log(`${n.padEnd(60)} ${fmt(s.raw).padStart(11)} ${fmt(s.gz).padStart(10)} ${fmt(s.br).padStart(10)}`);
  }
}
