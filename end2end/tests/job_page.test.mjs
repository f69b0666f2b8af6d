// A job's page, without JavaScript (plain HTML forms): it says when the job was submitted,
// started and how long it ran; Abort asks first (and Cancel leaves it running); "Resubmit a
// copy" makes one copy, and pressing it again opens the same copy instead of a second one.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, shot, signIn, unique } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

async function submit(page, selector) {
  await Promise.all([page.waitForNavigation(), page.click(selector)]);
}

test('a job page asks before aborting and resubmits one copy, without JavaScript', async () => {
  const context = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  await signIn(page, 'acme', 'bob');
  await page.goto(`${BASE}/portal`);
  const name = unique('page-job');
  await page.selectOption('#job-queue', { index: 0 });
  await page.fill('#job-name', name);
  await page.fill('#job-command', 'python train.py');
  // A long run, so it stays live (waiting or running) for the whole test.
  await page.fill('#job-duration', '3600');
  await submit(page, 'button:has-text("Submit job")');
  await submit(page, `a:has-text("${name}")`);
  const original = page.url();
  assert.equal(await page.textContent('[data-testid=job-name]'), name);
  assert.match((await page.textContent('[data-testid=job-duration]')).trim(), /^(not started|still running)$/);
  assert.match(await page.textContent('main'), /Submitted\s*\d{4}-\d\d-\d\d/);

  // Abort asks first; Cancel leaves the job as it was.
  await submit(page, '[data-testid=abort-start]');
  assert.match(page.url(), /confirm=abort/);
  const confirm = await page.textContent('[data-testid=abort-confirm]');
  assert.match(confirm, new RegExp(`Abort ${name}\\?`));
  assert.match(confirm, /cannot be undone/);
  await shot(page, 'job-abort-confirm');
  await page.setViewportSize({ width: 390, height: 844 });
  await shot(page, 'job-abort-confirm-phone');
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth) <= 390, 'fits 390 px');
  await page.setViewportSize({ width: 1440, height: 900 });
  await submit(page, '[data-testid=abort-confirm] a:has-text("Cancel")');
  assert.equal(await page.locator('[data-testid=abort-confirm]').count(), 0);
  assert.notEqual(await page.getAttribute('[data-testid=job-name] + span', 'data-state'), 'aborted');

  // One copy, however often the button is pressed on this job.
  await submit(page, '[data-testid=resubmit]');
  const copy = page.url();
  assert.notEqual(copy, original);
  assert.match(copy, /\/portal\/jobs\//);
  assert.equal(await page.textContent('[data-testid=job-name]'), name);
  await page.goto(original);
  await submit(page, '[data-testid=resubmit]');
  assert.equal(page.url(), copy, 'the same copy again');

  // The copy is aborted once confirmed.
  await submit(page, '[data-testid=abort-start]');
  await submit(page, '[data-testid=abort-confirm] button:has-text("Yes, abort it")');
  await page.goto(copy);
  assert.equal(await page.getAttribute('[data-testid=job-name] + span', 'data-state'), 'aborted');
  await shot(page, 'job-aborted-copy');
  // And the original was not aborted.
  await page.goto(original);
  assert.notEqual(await page.getAttribute('[data-testid=job-name] + span', 'data-state'), 'aborted');
  await context.close();
});
