// The release build hydrates: `scripts/test.sh` builds it as `scripts/run.sh` does and runs this
// against it (the browser suite runs on the debug build, whose wasm is not run through wasm-opt).
// Each page of the console, as the demo's tenant admin: the page hydrates with no script error.
import assert from 'node:assert/strict';
import { BASE, launch, signIn, hydrated } from './tests/helpers.mjs';

const browser = await launch();
try {
  const page = await (await browser.newContext()).newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await signIn(page, 'acme', 'alice');
  for (const path of ['/portal', '/jobs', '/policy', '/history', '/catalog', '/settings', '/settings/sso']) {
    errors.length = 0;
    await page.goto(`${BASE}${path}`);
    await hydrated(page);
    assert.deepEqual(errors, [], `${path}: no script error`);
    console.log(`[release] ${path} hydrated`);
  }
} finally {
  await browser.close();
}
