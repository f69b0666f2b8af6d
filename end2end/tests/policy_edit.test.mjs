// Editing and deleting the Policy Manager's objects: a queue and a profile are edited in forms
// filled with their values, a pool is deleted after a confirmation, a delete of something in
// use is refused with the reason at the form, the same works without JavaScript, and a member
// opening the page gets 403. Objects are made for the test, so the demo's story is untouched.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, shot, signIn, hydrated, unique, scrollTo } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** The row of `name` in the configuration table `testid`. */
function row(page, testid, name) {
  return page.locator(`[data-testid=${testid}] tbody tr`, { hasText: name }).first();
}

/** The text of `name`'s row once it matches `re`: a saved form's table refreshes just after
 * the form says "Saved.". */
async function rowMatching(page, testid, name, re) {
  await page.waitForFunction(([testid, name, source]) => [...document.querySelectorAll(`[data-testid=${testid}] tbody tr`)]
    .some((r) => r.textContent.includes(name) && new RegExp(source).test(r.textContent)), [testid, name, re.source]);
  return row(page, testid, name).textContent();
}

/** Nothing is wider than the window, and every column of the groups table is in view. */
async function fits(page, what) {
  const width = page.viewportSize().width;
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth) <= width, `${what}: the page fits ${width} px`);
}

test('a queue and a profile are edited, a pool is deleted after a confirmation, and a delete in use says why', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const page = await context.newPage();
  await signIn(page, 'acme', 'alice');
  await page.goto(`${BASE}/policy`);
  await page.waitForSelector('[data-testid=groups-table]');
  await hydrated(page);

  // At 1440 px the groups table shows every column, Waiting included (it was clipped).
  const clipped = await page.evaluate(() => {
    const t = document.querySelector('[data-testid=groups-table]');
    return t.scrollWidth - t.parentElement.clientWidth;
  });
  assert.ok(clipped <= 0, `the groups table is ${clipped} px too wide for its card`);
  assert.ok(await page.locator('[data-testid=groups-table] th', { hasText: 'Waiting' }).isVisible());

  // Objects of our own: a profile, two pools, and a queue of data-eng over the first pool.
  const profile = unique('e2e-prof');
  await page.fill('#profile-name', profile);
  await page.fill('#profile-fixed', '1000');
  await page.click('button:has-text("Create profile")');
  await page.waitForSelector(`[data-testid=profiles-table] >> text=${profile}`);
  const pool = unique('e2e-pool');
  const spare = unique('e2e-spare');
  for (const name of [pool, spare]) {
    await page.fill('#pool-name', name);
    await page.fill('#pool-nodes', '1');
    await page.fill('#pool-gpus', '2');
    await page.click('button:has-text("Create pool")');
    await page.waitForSelector(`[data-testid=pools-table] >> text=${name}`);
  }
  const queue = unique('e2e-q');
  await page.fill('#queue-name', queue);
  await page.selectOption('#queue-policy', { label: 'data-eng' });
  await page.selectOption('#queue-profile', { label: profile });
  await page.selectOption('#queue-pool', { label: pool });
  await page.click('button:has-text("Create queue")');
  await page.waitForSelector(`[data-testid=queue-settings-table] >> text=${queue}`);

  // Edit the queue: its form holds its values; a new name, a spillover pool, a minimum runtime.
  await row(page, 'queue-settings-table', queue).locator('a:has-text("Edit")').click();
  await page.waitForSelector('[data-testid=edit-queue]');
  assert.match(page.url(), /\?edit=queue:/);
  assert.equal(await page.inputValue('#edit-queue-name'), queue);
  assert.equal(await page.locator('#edit-queue-profile option:checked').textContent(), profile);
  assert.equal(await page.locator('#edit-queue-pool-0 option:checked').textContent(), pool);
  const renamed = `${queue}-2`;
  await page.fill('#edit-queue-name', renamed);
  await page.selectOption('#edit-queue-pool-1', { label: spare });
  await page.fill('#edit-queue-runtime', '120');
  await page.click('button:has-text("Save queue")');
  await page.waitForSelector('[data-testid=edit-queue] [role=status] >> text=Saved.');
  const edited = await rowMatching(page, 'queue-settings-table', renamed, new RegExp(`${pool} → ${spare}`));
  assert.match(edited, new RegExp(`${pool} → ${spare}`));
  assert.match(edited, /2 min 0 s/);
  await scrollTo(page, '[data-testid=edit-queue]');
  await shot(page, 'policy-edit-queue');
  // The same form at 390 px: nothing wider than the phone.
  await page.setViewportSize({ width: 390, height: 844 });
  await fits(page, 'the queue form');
  await shot(page, 'policy-edit-queue-phone');
  await page.setViewportSize({ width: 1440, height: 1000 });

  // Edit the profile: from 1 GPU per job to half of one.
  await row(page, 'profiles-table', profile).locator('a:has-text("Edit")').click();
  await page.waitForSelector('[data-testid=edit-profile]');
  assert.equal(await page.inputValue('#edit-profile-fixed'), '1000');
  await page.fill('#edit-profile-fixed', '500');
  await page.click('button:has-text("Save profile")');
  await page.waitForSelector('[data-testid=edit-profile] [role=status] >> text=Saved.');
  assert.match(await rowMatching(page, 'profiles-table', profile, /0\.5/), /0\.5/);
  await shot(page, 'policy-edit-profile');

  // Edit a pool: its form holds its values; a node more and another price.
  await row(page, 'pools-table', spare).locator('a:has-text("Edit")').click();
  await page.waitForSelector('[data-testid=edit-pool]');
  assert.equal(await page.inputValue('#edit-pool-name'), spare);
  assert.equal(await page.inputValue('#edit-pool-nodes'), '1');
  assert.equal(await page.inputValue('#edit-pool-gpus'), '2');
  await page.fill('#edit-pool-nodes', '2');
  await page.fill('#edit-pool-cost', '250');
  await page.click('button:has-text("Save pool")');
  await page.waitForSelector('[data-testid=edit-pool] [role=status] >> text=Saved.');
  const pooled = await rowMatching(page, 'pools-table', spare, /4 × H100-80GB/);
  assert.match(pooled, /4 × H100-80GB/, pooled);
  assert.match(pooled, /\$2\.50/, pooled);
  await scrollTo(page, '[data-testid=edit-pool]');
  await shot(page, 'policy-edit-pool');

  // A delete of the profile, which the queue uses: asked first, then refused at the form.
  await row(page, 'profiles-table', profile).locator('a:has-text("Delete")').click();
  await page.waitForSelector('[data-testid=confirm-delete]');
  assert.match(await page.textContent('[data-testid=confirm-delete]'), new RegExp(`Really delete profile ${profile}\\? This cannot be undone\\.`));
  await page.click(`button:has-text("Delete profile ${profile}")`);
  await page.waitForSelector('[data-testid=confirm-delete] [role=alert]');
  const why = await page.textContent('[data-testid=confirm-delete] [role=alert]');
  assert.match(why, new RegExp(`The profile is in use: queue ${renamed} uses it`), why);
  await page.waitForSelector(`[data-testid=profiles-table] >> text=${profile}`);
  await scrollTo(page, '[data-testid=confirm-delete]');
  await shot(page, 'policy-delete-in-use');
  await page.setViewportSize({ width: 390, height: 844 });
  await fits(page, 'the refused delete');
  await shot(page, 'policy-delete-in-use-phone');
  await page.setViewportSize({ width: 1440, height: 1000 });

  // The queue goes (it has no jobs), then the profile and the pools it used.
  await row(page, 'queue-settings-table', renamed).locator('a:has-text("Delete")').click();
  await page.click(`button:has-text("Delete queue ${renamed}")`);
  await page.waitForSelector('#queue-panel >> text=The queue was deleted.');
  assert.equal(await page.locator(`[data-testid=queue-settings-table] tr[data-queue="${renamed}"]`).count(), 0);
  await row(page, 'profiles-table', profile).locator('a:has-text("Delete")').click();
  await page.click(`button:has-text("Delete profile ${profile}")`);
  await page.waitForSelector('text=The profile was deleted.');

  // Delete a pool, with its confirmation: Cancel keeps it, Delete removes it.
  await row(page, 'pools-table', spare).locator('a:has-text("Delete")').click();
  await page.waitForSelector(`text=Really delete pool ${spare}? This cannot be undone.`);
  await page.click('[data-testid=confirm-delete] a:has-text("Cancel")');
  await page.waitForFunction(() => !document.querySelector('[data-testid=confirm-delete]'));
  assert.equal(await page.locator(`[data-testid=pools-table] tr[data-pool="${spare}"]`).count(), 1);
  await row(page, 'pools-table', spare).locator('a:has-text("Delete")').click();
  await scrollTo(page, '[data-testid=confirm-delete]');
  await shot(page, 'policy-delete-confirm');
  await page.click(`button:has-text("Delete pool ${spare}")`);
  await page.waitForSelector('text=The pool was deleted.');
  assert.equal(await page.locator(`[data-testid=pools-table] tr[data-pool="${spare}"]`).count(), 0);
  await row(page, 'pools-table', pool).locator('a:has-text("Delete")').click();
  await page.click(`button:has-text("Delete pool ${pool}")`);
  await page.waitForSelector('text=The pool was deleted.');
  // Shared pools are the platform admins': no Edit or Delete on them for a tenant admin.
  assert.match(await row(page, 'pools-table', 'h100-shared').textContent(), /platform admins/);
  await page.goto(`${BASE}/policy`);
  await page.waitForSelector('[data-testid=groups-table]');
  await hydrated(page);
  // The charts are drawn once hydrated, with a short animation.
  await page.waitForSelector('#quota-chart canvas', { timeout: 15000 });
  await page.waitForTimeout(1500);
  await shot(page, 'policy-manager-config');
  await page.setViewportSize({ width: 390, height: 844 });
  await fits(page, 'the Policy Manager');
  await shot(page, 'policy-manager-config-phone');
  await context.close();
});

test('without JavaScript: a policy\'s per-pool quota is edited, and a pool is deleted after its confirmation', async () => {
  const context = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 1440, height: 1000 } });
  const page = await context.newPage();
  const submit = (button) => Promise.all([page.waitForNavigation(), page.click(button)]);
  await signIn(page, 'acme', 'alice');
  await page.goto(`${BASE}/policy`);
  await page.waitForSelector('#pool-name');
  const pool = unique('nojs-pool');
  await page.fill('#pool-name', pool);
  await submit('button:has-text("Create pool")');
  await page.waitForSelector(`[data-testid=pools-table] >> text=${pool}`);

  // data-eng's policy: a quota on the new pool, one row per pool; a bad one is kept and refused.
  await Promise.all([page.waitForNavigation(), row(page, 'policies-table', 'data-eng').locator('a:has-text("Edit")').click()]);
  await page.waitForSelector('[data-testid=edit-policy]');
  const limit = await page.inputValue('#edit-policy-limit');
  const quota = page.locator(`[data-testid=quota-rows] [data-quota="${pool}"]`);
  await quota.locator('input[name$="[reservation_milli]"]').fill('500');
  await quota.locator('input[name$="[limit_milli]"]').fill('99999999999');
  await submit('button:has-text("Save policy")');
  await page.waitForSelector('[data-testid=edit-policy] [data-field-error=pools]');
  assert.equal(await quota.locator('input[name$="[limit_milli]"]').inputValue(), '99999999999');
  await scrollTo(page, '[data-testid=edit-policy]');
  await shot(page, 'policy-edit-quota-rejected');
  await quota.locator('input[name$="[limit_milli]"]').fill('1000');
  await submit('button:has-text("Save policy")');
  await page.waitForSelector('[data-testid=edit-policy] [role=status] >> text=Saved.');
  assert.equal(await quota.locator('input[name$="[limit_milli]"]').inputValue(), '1000');
  assert.equal(await page.inputValue('#edit-policy-limit'), limit);
  assert.match(await row(page, 'policies-table', 'data-eng').textContent(), new RegExp(`${pool}: 0\\.5 to 1`));
  await shot(page, 'policy-edit-quota');

  // The quota goes with the pool, which is deleted in two steps.
  await Promise.all([page.waitForNavigation(), row(page, 'pools-table', pool).locator('a:has-text("Delete")').click()]);
  assert.match(page.url(), /\?confirm=pool:/);
  assert.match(await page.textContent('[data-testid=confirm-delete]'), /This cannot be undone/);
  assert.equal(await page.locator(`[data-testid=pools-table] tr[data-pool="${pool}"]`).count(), 1, 'nothing deleted yet');
  await submit(`button:has-text("Delete pool ${pool}")`);
  await page.waitForSelector('text=The pool was deleted.');
  assert.equal(await page.locator(`[data-testid=pools-table] tr[data-pool="${pool}"]`).count(), 0);
  assert.doesNotMatch(await row(page, 'policies-table', 'data-eng').textContent(), new RegExp(pool));
  await context.close();
});

test('a member opening the Policy Manager gets 403 and none of its objects', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  await signIn(page, 'acme', 'bob');
  const response = await page.goto(`${BASE}/policy`);
  assert.equal(response.status(), 403);
  assert.equal(await page.locator('[data-testid=pools-table]').count(), 0);
  assert.equal(await page.locator('a:has-text("Edit")').count(), 0);
  const edit = await page.goto(`${BASE}/policy?edit=queue:x`);
  assert.equal(edit.status(), 403);
  await shot(page, 'policy-member-403');
  await context.close();
});
