// Shared set-up for the browser suite: Debian chromium driven by playwright-core.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const BASE = process.env.SWITCHYARD_E2E_URL ?? 'http://127.0.0.1:3100';
export const PASSWORD = 'switchyard-demo';
// end2end/screenshots/, wherever the tests are started from.
export const SHOTS = process.env.SWITCHYARD_SCREENSHOTS
  ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'screenshots');
fs.mkdirSync(SHOTS, { recursive: true });

export async function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

export async function shot(page, name) {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

export async function signIn(page, tenant, username, password = PASSWORD) {
  await page.goto(`${BASE}/login`);
  await page.fill('#tenant', tenant);
  await page.fill('#username', username);
  await page.fill('#password', password);
  await Promise.all([page.waitForURL(/\/portal/), page.click('button[type=submit]')]);
}

export async function hydrated(page) {
  await page.waitForSelector('body[data-hydrated="true"]', { timeout: 20000 });
}

export function unique(prefix) {
  return `${prefix}-${Date.now().toString(36)}${Math.floor(Math.random() * 1e4)}`;
}

// Scrolls the element into view inside the page, in one step: a page that draws the element
// again after an action (its data refetched) cannot detach it between finding and scrolling.
export async function scrollTo(page, selector) {
  await page.waitForSelector(selector);
  await page.evaluate((sel) => document.querySelector(sel)?.scrollIntoView({ block: 'center' }), selector);
}

/// Holds back the answers of one server function (its path under /_sf/) by `ms` while `body`
/// runs: what a page shows between a change and its data read again, on a slow network.
export async function slowed(page, sf, ms, body) {
  const pattern = `**/_sf/${sf}**`;
  await page.route(pattern, async (route) => {
    await new Promise((r) => setTimeout(r, ms));
    await route.continue().catch(() => {});
  });
  try {
    await body();
  } finally {
    await page.unroute(pattern);
  }
}
