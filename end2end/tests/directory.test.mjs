// Users and groups edited where they are shown: a user's profile, role and disabled state in a
// form filled with their values, a password reset, a delete after a confirmation; a group
// renamed and deleted; a group's access rules added and deleted. The same without JavaScript
// keeps a rejected input. A member opening these pages gets 403. Objects are made for the
// test, so the demo's story is untouched.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, shot, signIn, hydrated, slowed, unique } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

async function fits(page, what) {
  const width = page.viewportSize().width;
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth) <= width, `${what}: the page fits ${width} px`);
}

async function phone(page, name) {
  await page.setViewportSize({ width: 390, height: 844 });
  await fits(page, name);
  await shot(page, `${name}-phone`);
  await page.setViewportSize({ width: 1440, height: 1000 });
}

test('a user is edited, disabled, given a new password and deleted after a confirmation', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const page = await context.newPage();
  await signIn(page, 'acme', 'alice');
  await page.goto(`${BASE}/settings`);
  await page.waitForSelector('[data-testid=users-table]');
  await hydrated(page);
  const name = unique('e2e-user');
  await page.fill('#new-username', name);
  await page.fill('#new-display-name', 'Temp Person');
  await page.fill('#new-password', 'a-long-enough-password');
  await page.click('button:has-text("Add user")');
  await page.waitForSelector(`[data-testid=users-table] >> text=${name}`);

  // The user's page: a form filled with their values.
  await page.click(`[data-testid=users-table] a:has-text("${name}")`);
  await page.waitForSelector('[data-testid=user-name]');
  await hydrated(page);
  assert.equal(await page.textContent('[data-testid=user-name]'), name);
  assert.equal(await page.inputValue('#user-display-name'), 'Temp Person');
  assert.equal(await page.isChecked('input[name=is_tenant_admin]'), false);
  assert.equal(await page.isChecked('input[name=disabled]'), false);

  // A new name, made admin, then disabled.
  await page.fill('#user-display-name', 'Renamed Person');
  await page.check('input[name=is_tenant_admin]');
  await page.check('input[name=disabled]');
  await page.click('button:has-text("Save")');
  await page.waitForSelector('[role=status] >> text=Saved.');
  await page.waitForFunction(() => /tenant admin, disabled/.test(document.querySelector('[data-testid=user-status]').textContent));
  assert.match(await page.textContent('[data-testid=user-status]'), /Renamed Person · tenant admin, disabled/);

  // A password too short is refused at its field; a good one is set.
  await page.fill('#user-password', 'short');
  await page.click('button:has-text("Set password")');
  await page.waitForSelector('[data-field-error=password]');
  assert.match(await page.textContent('[data-field-error=password]'), /12/);
  await page.fill('#user-password', 'another-long-password');
  await page.click('button:has-text("Set password")');
  await page.waitForSelector('[role=status] >> text=Password set.');
  await shot(page, 'user-edit');
  await phone(page, 'user-edit');

  // The signed-in admin cannot disable themselves: said at the field.
  await page.goto(`${BASE}/settings`);
  await page.waitForSelector('[data-testid=users-table]');
  await page.click('[data-testid=users-table] a:has-text("alice")');
  await page.waitForSelector('#user-display-name');
  await hydrated(page);
  await page.check('input[name=disabled]');
  await page.click('button:has-text("Save")');
  await page.waitForSelector('[data-field-error=disabled]');
  assert.match(await page.textContent('[data-field-error=disabled]'), /cannot disable your own account/);

  // Delete, confirmed: Cancel keeps the user, Delete removes them.
  await page.goto(`${BASE}/settings`);
  await page.click(`[data-testid=users-table] a:has-text("${name}")`);
  await page.waitForSelector('[data-testid=delete-user]');
  await hydrated(page);
  await page.click('[data-testid=delete-user]');
  await page.waitForSelector(`text=Really delete user ${name}? This cannot be undone.`);
  await shot(page, 'user-delete-confirm');
  await page.click('[data-testid=confirm-delete] a:has-text("Cancel")');
  await page.waitForSelector('[data-testid=delete-user]');
  await page.click('[data-testid=delete-user]');
  await page.click(`button:has-text("Delete user ${name}")`);
  await page.waitForSelector('[data-testid=user-deleted]');
  await page.goto(`${BASE}/settings`);
  await page.waitForSelector('[data-testid=users-table]');
  assert.equal(await page.locator(`[data-testid=users-table] >> text=${name}`).count(), 0);
  await context.close();
});

test('a group is renamed, given an access rule, the rule and the group deleted after confirmations', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const page = await context.newPage();
  await signIn(page, 'acme', 'alice');
  await page.goto(`${BASE}/settings`);
  await page.waitForSelector('#group-name');
  await hydrated(page);
  const name = unique('e2e-group');
  await page.fill('#group-name', name);
  await page.fill('#group-description', 'made by the browser test');
  await page.click('button:has-text("Create group")');
  await page.click(`[data-testid=groups-table] a:has-text("${name}")`);
  await page.waitForSelector('#group-edit-name');
  await hydrated(page);
  assert.equal(await page.inputValue('#group-edit-name'), name);
  assert.equal(await page.inputValue('#group-edit-description'), 'made by the browser test');

  const renamed = `${name}-2`;
  await page.fill('#group-edit-name', renamed);
  await page.click('button:has-text("Save")');
  await page.waitForSelector('[role=status] >> text=Saved.');
  await page.waitForFunction((n) => document.querySelector('[data-testid=group-name]').textContent === n, renamed);

  // A rule: use on models in the llm-finetune project and below.
  await page.selectOption('#rule-permission', 'use');
  await page.selectOption('#rule-kind', 'model');
  await page.selectOption('#rule-scope', { label: 'in llm-finetune' });
  await page.click('button:has-text("Add rule")');
  await page.waitForSelector('[data-testid=rules-table] >> text=models in project llm-finetune and below');
  // One named resource of another kind than the rule's is refused at the field.
  await page.selectOption('#rule-kind', 'dataset');
  await page.selectOption('#rule-scope', { label: 'project vision' });
  await page.click('button:has-text("Add rule")');
  await page.waitForSelector('[data-field-error=resource_id]');
  assert.match(await page.textContent('[data-field-error=resource_id]'), /no such dataset/);
  await shot(page, 'group-rules');
  await phone(page, 'group-rules');

  // The member's view of what they can do shows the rule's reach through the group.
  // Delete the rule, confirmed. Once it says so, the rule is gone from the table, even while
  // the group is still being read again (held back here by 1.5 s).
  await page.click('[data-testid=rules-table] a:has-text("Delete")');
  await page.waitForSelector('text=Really delete the rule use on models in project llm-finetune and below? This cannot be undone.');
  await slowed(page, 'groups/detail', 1500, async () => {
    await page.click('button:has-text("Delete the rule use")');
    await page.waitForSelector('text=Rule deleted.');
    assert.equal(await page.locator('[data-testid=rules-table]').count(), 0);
  });

  // Delete the group, confirmed.
  await page.click('[data-testid=delete-group]');
  await page.waitForSelector(`text=Really delete group ${renamed}? This cannot be undone.`);
  await shot(page, 'group-delete-confirm');
  await page.click(`button:has-text("Delete group ${renamed}")`);
  await page.waitForSelector('[data-testid=group-deleted]');
  await page.goto(`${BASE}/settings`);
  await page.waitForSelector('[data-testid=groups-table]');
  assert.equal(await page.locator(`[data-testid=groups-table] >> text=${renamed}`).count(), 0);
  await context.close();
});

test('without JavaScript: a rejected group name is kept with its error, a user is deleted in two steps', async () => {
  const context = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 1440, height: 1000 } });
  const page = await context.newPage();
  const submit = (button) => Promise.all([page.waitForNavigation(), page.click(button)]);
  await signIn(page, 'acme', 'alice');
  await page.goto(`${BASE}/settings`);
  const group = unique('nojs-group');
  await page.fill('#group-name', group);
  await submit('button:has-text("Create group")');
  await Promise.all([page.waitForNavigation(), page.click(`[data-testid=groups-table] a:has-text("${group}")`)]);
  await page.fill('#group-edit-name', 'with/slash');
  await submit('button:has-text("Save")');
  await page.waitForSelector('[data-field-error=name]');
  assert.equal(await page.inputValue('#group-edit-name'), 'with/slash');
  await shot(page, 'group-rename-rejected-nojs');
  await page.fill('#group-edit-name', `${group}-ok`);
  await submit('button:has-text("Save")');
  await page.waitForSelector('[role=status] >> text=Saved.');
  assert.equal(await page.textContent('[data-testid=group-name]'), `${group}-ok`);

  await page.goto(`${BASE}/settings`);
  const user = unique('nojs-user');
  await page.fill('#new-username', user);
  await submit('button:has-text("Add user")');
  await Promise.all([page.waitForNavigation(), page.click(`[data-testid=users-table] a:has-text("${user}")`)]);
  await Promise.all([page.waitForNavigation(), page.click('[data-testid=delete-user]')]);
  assert.match(page.url(), /\?confirm=delete/);
  await submit(`button:has-text("Delete user ${user}")`);
  await page.waitForSelector('[data-testid=user-deleted]');
  await context.close();
});

test('a member opening a user or group page gets 403 and nothing of it', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  await signIn(page, 'acme', 'bob');
  for (const path of ['/settings/users/x', '/settings/groups/x', '/settings/users/x?confirm=delete']) {
    const response = await page.goto(`${BASE}${path}`);
    assert.equal(response.status(), 403, path);
    assert.equal(await page.locator('form').count(), 1, `${path}: only the sign-out form`);
  }
  await shot(page, 'user-member-403');
  await context.close();
});
