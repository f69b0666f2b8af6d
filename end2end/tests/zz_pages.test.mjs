// Every page of the console hydrates without a script error (a hydration mismatch is a console
// error and a panic) and into the server's HTML, not beside it (the page once came twice when its
// code chunk was still loading), for a tenant admin and for a member, including the states
// opened by a link (an edit form, a delete confirmation). Runs last: the other tests' objects
// are there.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, signIn, hydrated } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

async function visit(page, paths) {
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  // The browser logs a page answered 403 as a failed load: that status is the page's answer.
  page.on('console', (m) => {
    if (m.type() === 'error' && !/status of 403/.test(m.text())) errors.push(m.text().slice(0, 300));
  });
  for (const path of paths) {
    errors.length = 0;
    await page.goto(`${BASE}${path}`);
    const served = await page.locator('main *').count();
    await hydrated(page);
    await page.waitForTimeout(500);
    assert.deepEqual(errors, [], `${path}: no script error`);
    assert.equal(await page.locator('h1').count(), 1, `${path}: one heading after hydration`);
    const shown = await page.locator('main *').count();
    assert.ok(shown < served * 1.5, `${path}: hydrated into the served page (${served} elements served, ${shown} after hydration)`);
  }
}

test('every page hydrates without a script error, for a tenant admin', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  await signIn(page, 'acme', 'alice');
  await page.goto(`${BASE}/settings`);
  const user = await page.locator('[data-testid=users-table] a').nth(1).getAttribute('href');
  const group = await page.locator('[data-testid=groups-table] a').first().getAttribute('href');
  await page.goto(`${BASE}/portal`);
  const job = await page.locator('[data-testid=jobs-table] tbody a').first().getAttribute('href').catch(() => null);
  const paths = ['/portal', '/jobs', '/jobs?sort=queue&state=queued', '/policy', '/history?window=day', '/catalog',
    '/audit', '/settings', user, `${user}?confirm=delete`, `${user}/access`, group, `${group}?confirm=group`,
    '/settings/sso', '/settings/sso?confirm=scim'];
  if (job) paths.push(job, `${job}?confirm=abort`);
  // The gateway's pages, with what the gateway test left there.
  const href = async (selector) => {
    const link = page.locator(selector).first();
    return (await link.count()) ? link.getAttribute('href') : null;
  };
  paths.push('/endpoints', '/gateways');
  await page.goto(`${BASE}/endpoints`);
  const endpoint = await href('[data-testid=endpoints-table] tr:has-text("1 of 1 up") a') ?? await href('[data-testid=endpoints-table] a');
  if (endpoint) {
    await page.goto(`${BASE}${endpoint}`);
    paths.push(endpoint);
    const remove = await href('[data-testid=instances-table] a:has-text("Remove")');
    if (remove) paths.push(remove);
  }
  await page.goto(`${BASE}/gateways`);
  for (const table of ['gateways-table', 'routes-table']) {
    const confirm = await href(`[data-testid=${table}] a:has-text("Delete")`);
    if (confirm) paths.push(`/gateways${confirm}`);
  }
  await visit(page, paths);
  await context.close();
});

test('every page hydrates without a script error, for a member', async () => {
  const context = await browser.newContext({ viewport: { width: 390, height: 844 } });
  const page = await context.newPage();
  await signIn(page, 'acme', 'bob');
  await visit(page, ['/portal', '/jobs', '/history', '/catalog', '/endpoints', '/policy', '/settings', '/gateways']);
  // The admin pages answer 403, and say so.
  assert.equal((await page.goto(`${BASE}/settings`)).status(), 403);
  await context.close();
});
