// Forms that keep what was typed: with JavaScript off, a rejected form comes back with its
// errors at their fields and the user's input still in the inputs (never a password), and a
// saved one says so. Also: a failed sign-in keeps the username, and an empty pool name is
// blamed at the name, not at the nodes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, shot, signIn, hydrated, unique, scrollTo } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** A context without JavaScript: forms are plain HTML forms posted to the server. */
async function noScript(width = 1440, height = 900) {
  return browser.newContext({ javaScriptEnabled: false, viewport: { width, height } });
}

/** Submits the form of `button` and waits for the page the server redirects to. */
async function submit(page, button) {
  await Promise.all([page.waitForNavigation(), page.click(button)]);
}

/** Screenshots at 1440 px and at 390 px (a phone), and the page fits the phone. */
async function shots(page, name) {
  await shot(page, name);
  const wide = page.viewportSize();
  await page.setViewportSize({ width: 390, height: 844 });
  await shot(page, `${name}-phone`);
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth) <= 390, `${name} fits 390 px`);
  await page.setViewportSize(wide);
}

test('without JavaScript, a rejected job comes back filled in, and a valid one says it was submitted', async () => {
  const context = await noScript();
  const page = await context.newPage();
  await signIn(page, 'acme', 'bob');
  await page.goto(`${BASE}/portal`);
  await page.waitForSelector('#job-name');

  const name = unique('nojs-job');
  const command = 'python train.py --lr 3e-4 && echo "<done>"';
  // Not the first queue, so that the choice visibly comes back.
  const options = page.locator('#job-queue option');
  const queue = await options.nth((await options.count()) > 1 ? 1 : 0).getAttribute('value');
  await page.selectOption('#job-queue', queue);
  await page.fill('#job-name', name);
  await page.fill('#job-command', command);
  await page.fill('#job-gpus', '1000');
  await page.fill('#job-duration', '99999999999999999999');
  await page.fill('#job-max', '3600');
  await page.selectOption('#job-abort-kind', 'python');
  await page.fill('#job-abort-command', 'save_checkpoint()');
  await page.fill('#job-ckpt', 'ckpt/run-1');
  await submit(page, 'button:has-text("Submit job")');

  // Back on the portal, the error is at its field and every input holds what was typed.
  assert.match(page.url(), /__err=/);
  assert.match(page.url(), /__form=/);
  const error = await page.textContent('[data-field-error=duration_s]');
  assert.match(error, /too large/, error);
  assert.equal(await page.inputValue('#job-queue'), queue);
  assert.equal(await page.inputValue('#job-name'), name);
  assert.equal(await page.inputValue('#job-command'), command);
  assert.equal(await page.inputValue('#job-gpus'), '1000');
  assert.equal(await page.inputValue('#job-duration'), '99999999999999999999');
  assert.equal(await page.inputValue('#job-max'), '3600');
  assert.equal(await page.inputValue('#job-abort-kind'), 'python');
  assert.equal(await page.inputValue('#job-abort-command'), 'save_checkpoint()');
  assert.equal(await page.inputValue('#job-ckpt'), 'ckpt/run-1');
  assert.equal(await page.locator('[role=status]').count(), 0, 'nothing was submitted');
  await shots(page, 'forms-job-rejected');

  // The kept input is this session's: the same address in another session shows the error
  // but none of the input.
  const rejected = page.url();
  const other = await noScript();
  const otherPage = await other.newPage();
  await signIn(otherPage, 'acme', 'bob');
  await otherPage.goto(rejected);
  await otherPage.waitForSelector('[data-field-error=duration_s]');
  assert.equal(await otherPage.inputValue('#job-name'), '');
  assert.equal(await otherPage.inputValue('#job-command'), '');
  await other.close();

  // Corrected, it is submitted: the page says so, the form is empty again, the job is listed.
  await page.fill('#job-duration', '60');
  await submit(page, 'button:has-text("Submit job")');
  assert.match(page.url(), /__ok=/);
  assert.doesNotMatch(page.url(), /__err=|__form=/);
  assert.match(await page.textContent('[role=status]'), /Job submitted/);
  assert.equal(await page.locator('[data-field-error]').count(), 0);
  assert.equal(await page.inputValue('#job-name'), '');
  await page.waitForSelector(`[data-job="${name}"]`);
  await shots(page, 'forms-job-submitted');
  await context.close();
});

test('a page that comes back filled in still hydrates, and keeps the values while it updates', async () => {
  // JavaScript on, but the form is posted before the WebAssembly arrives (a slow link).
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  await page.route('**/*.wasm', route => route.abort());
  await signIn(page, 'acme', 'bob');
  await page.waitForSelector('#job-name');
  const name = unique('early-job');
  await page.fill('#job-name', name);
  await page.fill('#job-command', 'echo "<a>" & echo b');
  await page.fill('#job-duration', '-5');
  await submit(page, 'button:has-text("Submit job")');
  assert.match(page.url(), /__form=/);

  // The same page, now hydrating: no script error, and the typed values stay through the
  // portal's live updates (every 2 s).
  await page.unroute('**/*.wasm');
  // Errors of the reloaded page only: the page before it may still report its refused
  // WebAssembly download ("Failed to fetch") after the route is lifted.
  const errors = [];
  let reloaded = false;
  page.on('framenavigated', (frame) => { if (frame === page.mainFrame()) reloaded = true; });
  page.on('pageerror', e => { if (reloaded) errors.push(String(e)); });
  await page.reload();
  await hydrated(page);
  await page.waitForTimeout(4500);
  assert.deepEqual(errors, []);
  assert.equal(await page.inputValue('#job-name'), name);
  assert.equal(await page.inputValue('#job-command'), 'echo "<a>" & echo b');
  assert.equal(await page.inputValue('#job-duration'), '-5');
  assert.match(await page.textContent('[data-field-error=duration_s]'), /between 0 and/);

  // Corrected and submitted with JavaScript: no reload, and the page says so.
  await page.fill('#job-duration', '60');
  await page.click('button:has-text("Submit job")');
  await page.waitForSelector('[role=status] >> text=Submitted');
  await page.waitForSelector(`[data-job="${name}"]`);
  await context.close();
});

test('without JavaScript, a rejected user keeps what was typed except the password', async () => {
  const context = await noScript();
  const page = await context.newPage();
  await signIn(page, 'acme', 'alice');
  await page.goto(`${BASE}/settings`);
  await page.waitForSelector('#new-username');

  await page.fill('#new-username', 'Not A Name!');
  await page.fill('#new-display-name', 'Erin Example');
  await page.fill('#new-email', 'erin@example.com');
  await page.fill('#new-password', 'short');
  await page.check('input[name=is_tenant_admin]');
  await submit(page, 'button:has-text("Add user")');

  assert.match(await page.textContent('[data-field-error=username]'), /lower-case/);
  assert.match(await page.textContent('[data-field-error=password]'), /12 characters/);
  assert.equal(await page.inputValue('#new-username'), 'Not A Name!');
  assert.equal(await page.inputValue('#new-display-name'), 'Erin Example');
  assert.equal(await page.inputValue('#new-email'), 'erin@example.com');
  assert.equal(await page.inputValue('#new-password'), '', 'a password is never typed back');
  assert.ok(!(await page.content()).includes('value="short"'), 'the password is nowhere in the page');
  assert.ok(await page.isChecked('input[name=is_tenant_admin]'));
  await shots(page, 'forms-user-rejected');

  const username = unique('erin').toLowerCase();
  await page.fill('#new-username', username);
  await page.fill('#new-password', 'a-long-enough-password');
  await submit(page, 'button:has-text("Add user")');
  assert.match(await page.textContent('[role=status]'), /User added/);
  await page.waitForSelector(`[data-testid=users-table] >> text=${username}`);
  assert.equal(await page.inputValue('#new-display-name'), '');
  await context.close();
});

test('without JavaScript, an empty pool name is blamed at the name only, and a bad profile number keeps the form', async () => {
  const context = await noScript(1440, 1000);
  const page = await context.newPage();
  await signIn(page, 'acme', 'alice');
  await page.goto(`${BASE}/policy`);
  await page.waitForSelector('#pool-name');

  // The pool: no name, but three nodes of 4 GPUs.
  await page.fill('#pool-nodes', '3');
  await page.fill('#pool-gpus', '4');
  await page.fill('#pool-model', 'A100-40GB');
  await submit(page, 'button:has-text("Create pool")');
  assert.equal((await page.textContent('[data-field-error=name]')).trim(), 'is required');
  assert.equal(await page.locator('[data-field-error=nodes]').count(), 0, 'the nodes are not blamed');
  assert.equal(await page.inputValue('#pool-nodes'), '3');
  assert.equal(await page.inputValue('#pool-gpus'), '4');
  assert.equal(await page.inputValue('#pool-model'), 'A100-40GB');
  await scrollTo(page, '#pool-name');
  await shots(page, 'forms-pool-rejected');

  // The profile: a number that is not one.
  const profile = unique('nojs-profile');
  await page.fill('#profile-name', profile);
  await page.fill('#profile-min', '250');
  await page.fill('#profile-max', '8k');
  await submit(page, 'button:has-text("Create profile")');
  assert.match(await page.textContent('[data-field-error=max_gpu_milli]'), /whole number/);
  assert.equal(await page.inputValue('#profile-name'), profile);
  assert.equal(await page.inputValue('#profile-min'), '250');
  assert.equal(await page.inputValue('#profile-max'), '8k');
  // The pool form's input belonged to the pool's post, not this one.
  assert.equal(await page.inputValue('#pool-nodes'), '1');
  await scrollTo(page, '#profile-name');
  await shots(page, 'forms-profile-rejected');

  await page.fill('#profile-max', '8000');
  await submit(page, 'button:has-text("Create profile")');
  assert.match(await page.textContent('[role=status]'), /Profile created/);
  await page.waitForSelector(`[data-testid=profiles-table] >> text=${profile}`);
  await context.close();
});

test('without JavaScript, a failed sign-in keeps the organization and username, not the password', async () => {
  const context = await noScript();
  const page = await context.newPage();
  await page.goto(`${BASE}/login`);
  await page.fill('#tenant', 'acme');
  await page.fill('#username', 'alice');
  await page.fill('#password', 'not-the-password');
  await submit(page, 'button[type=submit]');
  assert.match(await page.textContent('[role=alert]'), /Wrong organization, username or password/);
  assert.equal(await page.inputValue('#tenant'), 'acme');
  assert.equal(await page.inputValue('#username'), 'alice');
  assert.equal(await page.inputValue('#password'), '');
  assert.doesNotMatch(page.url(), /not-the-password/);
  await shots(page, 'forms-login-rejected');
  await context.close();
});
