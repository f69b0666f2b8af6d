// The sign-in settings page edits what it shows: a provider's form filled with its values
// (the stored secret kept unless a new one is typed), turning it off, removing it after a
// confirmation; and the SCIM token issued (shown once, working), then revoked (refused).
// Needs no identity provider running: the directory is only saved, never reached.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, PASSWORD, launch, shot, signIn, hydrated, unique } from './helpers.mjs';

let browser;
let token;
before(async () => {
  browser = await launch();
  const r = await fetch(`${BASE}/api/v1/auth/login`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ tenant: 'acme', username: 'alice', password: PASSWORD }),
  });
  token = (await r.json()).token;
});
after(async () => { await browser?.close(); });

async function api(method, path, body) {
  const r = await fetch(`${BASE}/api/v1${path}`, {
    method,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

test('a directory is edited in its filled form, turned off, and removed after a confirmation', async () => {
  const name = unique('e2e-dir');
  const made = await api('POST', '/idp', {
    name, display_name: 'E2E Directory', kind: 'ldap',
    ldap: { url: 'ldap://127.0.0.1:1389', base_dn: 'ou=people,dc=e2e,dc=test', bind_dn: 'cn=svc,dc=e2e,dc=test', group_lookup: 'search', group_base_dn: 'ou=groups,dc=e2e,dc=test' },
    client_secret: 'svc-password',
  });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const page = await context.newPage();
  await signIn(page, 'acme', 'alice');
  await page.goto(`${BASE}/settings/sso`);
  await page.waitForSelector(`[data-idp="${name}"]`);
  await hydrated(page);

  await page.click(`[data-idp="${name}"] a:has-text("Edit")`);
  await page.waitForSelector('#idp-edit');
  assert.match(await page.textContent('#idp-edit h2'), /Edit E2E Directory/);
  assert.equal(await page.inputValue('#ldap-name'), name);
  assert.equal(await page.inputValue('#ldap-url'), 'ldap://127.0.0.1:1389');
  assert.equal(await page.inputValue('#ldap-base'), 'ou=people,dc=e2e,dc=test');
  assert.equal(await page.inputValue('#ldap-group-base'), 'ou=groups,dc=e2e,dc=test');
  assert.equal(await page.locator('#ldap-lookup option:checked').getAttribute('value'), 'search');
  assert.equal(await page.inputValue('#ldap-bind-pw'), '', 'the secret is never sent to the page');
  assert.equal(await page.isChecked('#idp-edit input[name=enabled]'), true);
  // While editing, the forms that add providers are not shown.
  assert.equal(await page.locator('button:has-text("Add provider")').count(), 0);

  await page.fill('#ldap-display', 'E2E Directory (old)');
  await page.uncheck('#idp-edit input[name=enabled]');
  await page.click('button:has-text("Save provider")');
  await page.waitForSelector('#idp-edit [role=status] >> text=Saved.');
  await page.waitForFunction((n) => /LDAP \(off\)/.test(document.querySelector(`[data-idp="${n}"]`).textContent), name);
  const row = await page.textContent(`[data-idp="${name}"]`);
  assert.match(row, /E2E Directory \(old\)/);
  assert.match(row, /stored/, 'the stored secret was kept');
  const saved = (await api('GET', '/idp')).body.find((p) => p.name === name);
  assert.equal(saved.enabled, false);
  assert.equal(saved.has_client_secret, true);
  assert.equal(saved.ldap.group_base_dn, 'ou=groups,dc=e2e,dc=test');
  await shot(page, 'sso-edit');
  await page.setViewportSize({ width: 390, height: 844 });
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth) <= 390, 'the page fits 390 px');
  await shot(page, 'sso-edit-phone');
  await page.setViewportSize({ width: 1440, height: 1000 });

  // A bad URL is refused at its field, and what was typed stays.
  await page.fill('#ldap-url', 'http://not-ldap');
  await page.click('button:has-text("Save provider")');
  await page.waitForSelector('[data-field-error="ldap.url"]');
  assert.equal(await page.inputValue('#ldap-url'), 'http://not-ldap');

  await page.goto(`${BASE}/settings/sso`);
  await page.waitForSelector(`[data-idp="${name}"]`);
  await hydrated(page);
  await page.click(`[data-idp="${name}"] a:has-text("Remove")`);
  await page.waitForSelector('text=Really delete provider E2E Directory (old)? This cannot be undone.');
  await page.click('[data-testid=confirm-delete] a:has-text("Cancel")');
  await page.waitForFunction(() => !document.querySelector('[data-testid=confirm-delete]'));
  assert.equal(await page.locator(`[data-idp="${name}"]`).count(), 1);
  await page.click(`[data-idp="${name}"] a:has-text("Remove")`);
  await page.click('button:has-text("Delete provider E2E Directory (old)")');
  await page.waitForSelector(`[data-idp="${name}"]`, { state: 'detached' });
  assert.ok(!(await api('GET', '/idp')).body.some((p) => p.name === name));
  await context.close();
});

test('the SCIM token is issued on the page, works, and stops working once revoked', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const page = await context.newPage();
  await signIn(page, 'acme', 'alice');
  await page.goto(`${BASE}/settings/sso`);
  await page.waitForSelector('[data-testid=scim-status]');
  await hydrated(page);
  await page.click('button:has-text("Issue a new token")');
  await page.waitForSelector('[data-testid=scim-token]');
  const scim = (await page.textContent('[data-testid=scim-token]')).trim();
  assert.match(scim, /^scim_/);
  await page.waitForFunction(() => /A token was issued/.test(document.querySelector('[data-testid=scim-status]').textContent));
  const users = await fetch(`${BASE}/scim/v2/Users`, { headers: { authorization: `Bearer ${scim}` } });
  assert.equal(users.status, 200);
  await page.locator('[data-testid=scim-token]').scrollIntoViewIfNeeded();
  await shot(page, 'scim-token');

  await page.click('a:has-text("Revoke the token")');
  await page.waitForSelector('text=Really delete the SCIM token? This cannot be undone.');
  await page.click('button:has-text("Delete the SCIM token")');
  await page.waitForSelector('text=Revoked: SCIM requests are refused from now on.');
  await page.waitForFunction(() => /No token/.test(document.querySelector('[data-testid=scim-status]').textContent));
  const refused = await fetch(`${BASE}/scim/v2/Users`, { headers: { authorization: `Bearer ${scim}` } });
  assert.equal(refused.status, 401);
  await context.close();
});
