// Page-load figures of a running Switchyard, as a browser sees them: for each page, signed in
// as the demo's tenant admin, a cold load (new browser context: nothing cached) and a warm one
// (the same context again: hashed assets from the cache), each on the local link and on an
// emulated slow one (10 Mbit/s down, 2 Mbit/s up, 40 ms round trip, through the Chrome
// DevTools protocol; cold: the browser cache cleared first). Printed per page: first byte (responseStart), DOM ready
// (domContentLoadedEventEnd), loaded (loadEventEnd), hydrated (the page's
// body[data-hydrated]), and the bytes transferred; medians of RUNS runs.
//
//   node scripts/page-load.mjs http://127.0.0.1:3000        (RUNS=5 by default)
//   LINKS=local node scripts/page-load.mjs …                 (only the local link: a debug
//                                                            build's 30 MB wasm takes half a
//                                                            minute on the slow one)
//
// The server must run with the demo (`switchyard serve --demo`, or scripts/run.sh).
import { chromium } from 'playwright-core';

const BASE = process.argv[2] ?? process.env.SWITCHYARD_URL ?? 'http://127.0.0.1:3000';
const RUNS = Number(process.env.RUNS ?? 5);
const PAGES = ['/portal', '/jobs', '/policy', '/history', '/catalog', '/settings'];
const ALL_LINKS = {
  local: null,
  slow: { offline: false, latency: 40, downloadThroughput: (10e6 / 8), uploadThroughput: (2e6 / 8) },
};
const LINKS = Object.fromEntries(Object.entries(ALL_LINKS)
  .filter(([name]) => (process.env.LINKS ?? 'local,slow').split(',').includes(name)));

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
});

async function signedInContext() {
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  await page.goto(`${BASE}/login`);
  await page.fill('#tenant', 'acme');
  await page.fill('#username', 'alice');
  await page.fill('#password', 'switchyard-demo');
  await Promise.all([page.waitForURL(/\/portal/), page.click('button[type=submit]')]);
  await page.close();
  return context;
}

async function measure(context, path, link, cold) {
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  // Signing in loaded the portal and its files: a cold load starts from an empty cache.
  if (cold) await cdp.send('Network.clearBrowserCache');
  if (link) await cdp.send('Network.emulateNetworkConditions', link);
  let bytes = 0;
  cdp.on('Network.loadingFinished', (e) => { bytes += e.encodedDataLength; });
  const start = Date.now();
  await page.goto(`${BASE}${path}`, { waitUntil: 'load', timeout: 180000 });
  await page.waitForSelector('body[data-hydrated="true"]', { timeout: 180000 });
  const hydrated = Date.now() - start;
  const nav = await page.evaluate(() => {
    const n = performance.getEntriesByType('navigation')[0];
    return { firstByte: n.responseStart, ready: n.domContentLoadedEventEnd, loaded: n.loadEventEnd };
  });
  await page.close();
  return { ...nav, hydrated, bytes };
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const ms = (x) => `${Math.round(x)} ms`;

console.log(`page-load figures of ${BASE}, median of ${RUNS} runs`);
console.log(['page', 'link', 'cache', 'first byte', 'DOM ready', 'loaded', 'hydrated', 'transferred'].map((h) => h.padEnd(12)).join(''));
for (const path of PAGES) {
  for (const [name, link] of Object.entries(LINKS)) {
    const cold = [];
    const warm = [];
    for (let i = 0; i < RUNS; i++) {
      const context = await signedInContext();
      cold.push(await measure(context, path, link, true));
      warm.push(await measure(context, path, link, false));
      await context.close();
    }
    for (const [cache, runs] of [['cold', cold], ['warm', warm]]) {
      const m = (k) => median(runs.map((r) => r[k]));
      console.log([path, name, cache, ms(m('firstByte')), ms(m('ready')), ms(m('loaded')), ms(m('hydrated')),
        `${Math.round(m('bytes') / 1024)} KiB`].map((c) => String(c).padEnd(12)).join(''));
    }
  }
}
await browser.close();
