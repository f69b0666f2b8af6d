// The history page on the demo data (a generated past week, then the scheduler's own samples):
// an admin's pools, groups and queues, a member's own group and queue, the platform admin's
// shared pool by organization; every chart beside a table, at 1440 and 390 px, and the
// window links work without JavaScript.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, shot, signIn, hydrated } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const rows = (page, testid) => page.locator(`[data-testid="${testid}"] tbody tr`).count();
const panels = (page) => page.locator('[data-testid^="history-"]').evaluateAll(
  (els) => els.map((e) => e.dataset.testid));

/** At least `n` charts are drawn, and their bars have grown (ECharts animates for a second). */
async function drawn(page, n) {
  await page.waitForFunction((k) => document.querySelectorAll('[data-chart] canvas').length >= k, n, { timeout: 15000 });
  await page.waitForTimeout(1500);
}

/** The page fits `width` (wide tables scroll inside their card). */
async function fits(page, width) {
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth) <= width, `the page fits ${width} px`);
}

test('an admin reads the allocation of pools and groups and the queues over an hour, a day and a week', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  await signIn(page, 'acme', 'alice');
  await page.click('nav >> text=History');
  await page.waitForSelector('[data-testid="history-pool-h100-shared"]');
  await hydrated(page);
  // The demo's past is generated, and the page says so.
  assert.match(await page.textContent('[data-testid=history-generated]'), /generated when the demo was seeded/);
  const seen = await panels(page);
  for (const p of ['history-pool-h100-shared', 'history-pool-acme-a100', 'history-group-ml-research',
    'history-group-inference', 'history-group-data-eng', 'history-queue-train', 'history-queue-serve', 'history-queue-etl']) {
    assert.ok(seen.includes(p), `${p} in ${seen}`);
  }
  assert.ok(!seen.some((p) => p.includes('research') && !p.includes('ml-research')), `no globex group: ${seen}`);
  // An hour of one-minute buckets: a row per minute with samples (the generated ones cover it).
  const hour = await rows(page, 'history-pool-h100-shared');
  assert.ok(hour >= 55 && hour <= 60, `an hour of minutes: ${hour}`);
  const first = page.locator('[data-testid="history-pool-h100-shared"] tbody tr').first();
  assert.match(await first.locator('td').first().textContent(), /^\d\d:\d\d$/);
  // The shared pool's 16 GPUs are in quota, over quota or idle in every row.
  const cells = (await first.locator('td').allTextContents()).slice(1).map(Number);
  assert.equal(cells.reduce((a, b) => a + b, 0), 16, `${cells}`);
  assert.match(await page.textContent('[data-testid="history-queue-etl"] thead'), /Wait p50.*p90.*p99/);
  // The charts are drawn after hydration, each beside its table.
  await drawn(page, 11);
  await shot(page, 'history-admin-hour');

  await page.click('a:has-text("Last day")');
  await page.waitForURL(/window=day/);
  await page.waitForFunction(() => /\d\d-\d\d \d\d:\d\d/.test(
    document.querySelector('[data-testid="history-group-ml-research"] tbody td')?.textContent ?? ''));
  const day = await rows(page, 'history-group-ml-research');
  assert.ok(day >= 95 && day <= 96, `a day of quarter hours: ${day}`);
  await page.click('a:has-text("Last week")');
  await page.waitForURL(/window=week/);
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="history-queue-train"] tbody tr').length >= 80);
  assert.equal(await page.getAttribute('a:has-text("Last week")', 'aria-current'), 'page');
  await drawn(page, 11);
  await shot(page, 'history-admin-week');

  await page.setViewportSize({ width: 390, height: 844 });
  await fits(page, 390);
  await shot(page, 'history-admin-week-phone');
  await context.close();
});

test('a member sees only its group and its queue', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  await signIn(page, 'acme', 'bob');
  await page.goto(`${BASE}/history`);
  await page.waitForSelector('[data-testid="history-group-ml-research"]');
  await hydrated(page);
  await drawn(page, 3);
  assert.deepEqual((await panels(page)).filter((p) => p !== 'history-generated').sort(),
    ['history-group-ml-research', 'history-queue-train']);
  assert.ok(await rows(page, 'history-queue-train') >= 55);
  const text = await page.textContent('main');
  for (const hidden of ['h100-shared', 'acme-a100', 'inference', 'data-eng']) {
    assert.ok(!text.includes(hidden), `${hidden} is not the member's`);
  }
  await shot(page, 'history-member');
  await page.setViewportSize({ width: 390, height: 844 });
  await fits(page, 390);
  await shot(page, 'history-member-phone');
  await context.close();
});

test('the platform admin sees the shared pool by organization, never their groups', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  await signIn(page, 'platform', 'root');
  await page.goto(`${BASE}/history?window=day`);
  await page.waitForSelector('[data-testid="history-tenants-h100-shared"]');
  const head = await page.textContent('[data-testid="history-tenants-h100-shared"] thead');
  assert.match(head, /Acme Robotics \(granted 14\)/, head);
  assert.match(head, /Globex/, head);
  assert.ok(await rows(page, 'history-tenants-h100-shared') >= 95);
  const text = await page.textContent('main');
  for (const hidden of ['ml-research', 'inference', 'acme-a100', 'forecast']) {
    assert.ok(!text.includes(hidden), `${hidden} is the tenant's own`);
  }
  await hydrated(page);
  await drawn(page, 2);
  await shot(page, 'history-platform-day');
  await page.setViewportSize({ width: 390, height: 844 });
  await fits(page, 390);
  await context.close();
});

test('without JavaScript the window links and the tables say it all', async () => {
  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, javaScriptEnabled: false });
  const page = await context.newPage();
  await signIn(page, 'acme', 'alice');
  await page.goto(`${BASE}/history`);
  await page.click('a:has-text("Last week")');
  await page.waitForURL(/window=week/);
  assert.ok(await rows(page, 'history-group-data-eng') >= 80);
  await fits(page, 390);
  await shot(page, 'history-no-js-phone');
  await page.goto(`${BASE}/history?window=month`);
  assert.match(await page.textContent('main'), /window: must be hour, day or week/);
  await context.close();
});
