// The foundation flows a tenant admin and a platform admin go through, in a real browser.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, shot, signIn, hydrated, slowed, unique } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

test('a tenant admin signs in, creates a group, adds a member, sees the audit trail and signs out', async () => {
  const context = await browser.newContext({ viewport: { width: 1366, height: 850 } });
  const page = await context.newPage();

  // Signed-out visitors are sent to the sign-in page.
  await page.goto(`${BASE}/settings`);
  assert.match(page.url(), /\/login\?next=%2Fsettings/);
  await shot(page, 'login');

  // A wrong password is refused with a message and no session.
  await page.fill('#tenant', 'acme');
  await page.fill('#username', 'alice');
  await page.fill('#password', 'not-the-password');
  await page.click('button[type=submit]');
  await page.waitForSelector('[role=alert]');
  assert.match(await page.textContent('[role=alert]'), /Wrong organization, username or password/);
  assert.equal((await context.cookies()).filter(c => c.name === 'sy_session').length, 0);

  await signIn(page, 'acme', 'alice');
  await hydrated(page);
  assert.match(await page.textContent('[data-testid=whoami]'), /Alice Martin/);
  const nav = await page.locator('nav[aria-label=Main] a').allTextContents();
  assert.deepEqual(nav, ['Portal', 'Jobs', 'Policy Manager', 'History', 'Catalog', 'Endpoints', 'Gateways', 'Audit', 'Settings']);
  await page.waitForSelector('[data-testid=quota-table]');
  assert.match(await page.textContent('[data-testid=quota-table]'), /ml-research/);
  await shot(page, 'portal');

  const cookie = (await context.cookies()).find(c => c.name === 'sy_session');
  assert.ok(cookie.httpOnly, 'session cookie is HttpOnly');
  assert.equal(cookie.sameSite, 'Lax');

  // Create a group without a page reload (the marker survives).
  await page.click('nav >> text=Settings');
  await page.waitForURL(/\/settings$/);
  await page.waitForSelector('[data-testid=groups-table]');
  await page.evaluate(() => { window.__noReload = true; });
  const group = unique('e2e-team');
  await page.fill('#group-name', group);
  await page.fill('#group-description', 'Made by the browser suite');
  await page.click('button:has-text("Create group")');
  await page.waitForSelector(`[data-testid=groups-table] >> text=${group}`);
  assert.equal(await page.evaluate(() => window.__noReload), true, 'no reload after hydration');

  // A duplicate name is refused at the field.
  await page.fill('#group-name', group);
  const refused = page.waitForResponse(r => r.url().includes('/_sf/groups/create'));
  await page.click('button:has-text("Create group")');
  assert.equal((await refused).status(), 422, 'a duplicate name is a field error, not a server error');
  await page.waitForSelector('[data-field-error=name]');
  assert.match(await page.textContent('[data-field-error=name]'), /exists/);
  await shot(page, 'settings');

  // Add bob to the new group.
  await page.click(`a:has-text("${group}")`);
  await page.waitForSelector('[data-testid=group-name]');
  assert.equal(await page.textContent('[data-testid=group-name]'), group);
  await hydrated(page);
  await page.selectOption('#add-user', { label: 'Bob Chen (bob)' });
  await page.click('button:has-text("Add member")');
  await page.waitForSelector('[data-testid=members-table] >> text=bob');
  await shot(page, 'group');
  // Add carol too, then remove her again: the member list follows without a reload.
  await page.selectOption('#add-user', { label: 'Carol Diaz (carol)' });
  await page.click('button:has-text("Add member")');
  await page.waitForSelector('[data-testid=members-table] >> text=carol');
  // Once it says so, carol is gone from the table, even while the group is still being read
  // again (held back here by 1.5 s).
  await slowed(page, 'groups/detail', 1500, async () => {
    await page.click('button[aria-label="Remove carol"]');
    await page.waitForSelector('text=Member removed.');
    assert.equal(await page.locator('[data-testid=members-table] >> text=carol').count(), 0);
  });
  await page.waitForSelector('[data-testid=members-table] >> text=bob');
  assert.deepEqual(
    (await page.locator('[data-testid=members-table] tbody td.font-mono').allTextContents()).map(s => s.trim()),
    ['bob']);

  // The audit log shows both changes, newest first, and filters by action.
  await page.goto(`${BASE}/audit`);
  await page.waitForSelector('[data-testid=audit-table]');
  const rows = await page.locator('[data-testid=audit-table] tbody tr').allTextContents();
  const addRow = rows.findIndex(r => r.includes('group.member_add') && r.includes(group));
  const createRow = rows.findIndex(r => r.includes('group.create') && r.includes(group));
  assert.ok(addRow >= 0 && createRow > addRow, `member_add above group.create in ${rows.slice(0, 5)}`);
  assert.match(rows[addRow], /alice/);
  assert.ok(rows.some(r => r.includes('group.member_remove') && r.includes('carol')), 'removal audited');
  await shot(page, 'audit');
  await page.fill('#f-action', 'group.member_add');
  await page.click('button:has-text("Filter")');
  await page.waitForURL(/action=group\.member_add/);
  await page.waitForSelector('[data-testid=audit-table]');
  const filtered = await page.locator('[data-testid=audit-table] tbody tr').allTextContents();
  assert.ok(filtered.length >= 1 && filtered.every(r => r.includes('group.member_add')), filtered.join('\n'));

  await page.goto(`${BASE}/policy`);
  await page.waitForSelector('h1:has-text("Policy Manager")');
  await shot(page, 'policy');

  // Sign out: back to the sign-in page, and the pages are closed again.
  await hydrated(page);
  await page.click('button:has-text("Sign out")');
  await page.waitForURL(/\/login\?signed_out=1/);
  assert.match(await page.textContent('[role=status]'), /signed out/);
  await page.goto(`${BASE}/settings`);
  assert.match(page.url(), /\/login/);
  await context.close();
});

test('a member sees only the portal and is refused administration', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await signIn(page, 'acme', 'bob');
  const nav = await page.locator('nav[aria-label=Main] a').allTextContents();
  assert.deepEqual(nav, ['Portal', 'Jobs', 'History', 'Catalog', 'Endpoints']);
  // Each admin page opened by its address answers 403 and shows nothing of itself.
  for (const path of ['/audit', '/settings', '/policy', '/platform', '/settings/sso']) {
    const resp = await page.goto(`${BASE}${path}`);
    assert.equal(resp.status(), 403, path);
    await page.waitForSelector('[data-testid=forbidden]');
    const body = await page.textContent('main');
    assert.doesNotMatch(body, /Add user|Create group|Users and groups|Audit log|Capacity/, path);
    assert.equal(await page.title(), 'Not allowed · Switchyard', path);
  }
  await shot(page, 'member-forbidden');
  // A job that is not there (or another tenant's) answers 404; so does an unknown address.
  const missing = await page.goto(`${BASE}/portal/jobs/nope`);
  assert.equal(missing.status(), 404);
  const unknown = await page.goto(`${BASE}/no-such-page`);
  assert.equal(unknown.status(), 404);
  assert.equal(await page.title(), 'Page not found · Switchyard');
  await page.waitForSelector('[data-testid=not-found]');
  await context.close();
});

test('the platform admin sees every tenant with its counts, not its contents', async () => {
  const context = await browser.newContext({ viewport: { width: 1366, height: 850 } });
  const page = await context.newPage();
  await signIn(page, 'platform', 'root');
  await page.click('nav >> text=Platform');
  await page.waitForSelector('[data-testid=tenants-table]');
  const rows = await page.locator('[data-testid=tenants-table] tbody tr').allTextContents();
  const acme = rows.find(r => r.includes('Acme Robotics'));
  assert.ok(acme, rows.join('\n'));
  assert.ok(rows.some(r => r.includes('Globex')));
  await hydrated(page);
  const slug = unique('initech');
  await page.fill('#tenant-slug', slug);
  await page.fill('#tenant-name', 'Initech');
  await page.click('button:has-text("Create tenant")');
  await page.waitForSelector(`[data-testid=tenants-table] >> text=${slug}`);
  await page.fill('#tenant-slug', 'Not A Slug!');
  await page.fill('#tenant-name', 'Bad');
  await page.click('button:has-text("Create tenant")');
  await page.waitForSelector('[data-field-error=slug]');
  await shot(page, 'platform');
  await context.close();
});

test('forms work before hydration (JavaScript off)', async () => {
  const context = await browser.newContext({ javaScriptEnabled: false });
  const page = await context.newPage();
  await signIn(page, 'acme', 'alice');
  await page.goto(`${BASE}/settings`);
  await page.waitForSelector('[data-testid=groups-table]');
  const group = unique('nojs');
  await page.fill('#group-name', group);
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Create group")')]);
  await page.goto(`${BASE}/settings`);
  await page.waitForSelector(`[data-testid=groups-table] >> text=${group}`);
  await context.close();
});
