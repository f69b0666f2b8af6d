// Single sign-on in a real browser against real identity providers started by scripts/test.sh:
// npm oidc-provider (OIDC, its own login form), a samlify SAML 2.0 IdP (its own login form and
// HTTP-POST auto-submit) and Debian's slapd (LDAP). A tenant admin adds all three through the
// API; users sign in from the tenant's sign-in page; a tampered ID token or SAML response lands
// back on the sign-in page with a message and no session.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, PASSWORD, launch, shot, hydrated, unique } from './helpers.mjs';

const OIDC = process.env.SWITCHYARD_E2E_OIDC;
const LDAP = process.env.SWITCHYARD_E2E_LDAP;
const SAML = process.env.SWITCHYARD_E2E_SAML;
// scripts/test.sh registers this provider's SP (entity ID and ACS) at the SAML IdP.
const SAML_NAME = 'corp-saml';

let browser;
let token;
const names = { oidc: unique('corp'), ldap: unique('dir') };

async function api(method, path, body) {
  const r = await fetch(`${BASE}/api/v1${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

before(async () => {
  assert.ok(OIDC && LDAP && SAML, 'scripts/test.sh starts the IdPs and sets SWITCHYARD_E2E_OIDC/LDAP/SAML');
  browser = await launch();
  const login = await api('POST', '/auth/login', { tenant: 'acme', username: 'alice', password: PASSWORD });
  token = login.body.token;
  const oidc = await api('POST', '/idp', {
    name: names.oidc, display_name: 'Acme Okta', kind: 'oidc',
    oidc: { issuer: OIDC, client_id: 'switchyard' }, client_secret: 'switchyard-oidc-secret',
  });
  assert.equal(oidc.status, 201, JSON.stringify(oidc.body));
  const ldap = await api('POST', '/idp', {
    name: names.ldap, display_name: 'Acme Directory', kind: 'ldap',
    ldap: { url: LDAP, user_dn_template: 'uid={username},ou=people,dc=acme,dc=test' },
  });
  assert.equal(ldap.status, 201, JSON.stringify(ldap.body));
  const saml = await api('POST', '/idp', {
    name: SAML_NAME, display_name: 'Acme ADFS', kind: 'saml',
    saml: { idp_metadata_url: `${SAML}/metadata` },
  });
  assert.ok(saml.status === 201 || saml.status === 409, JSON.stringify(saml.body));
});

async function samlSignIn(page, username, password) {
  await page.goto(`${BASE}/t/acme/login`);
  await Promise.all([page.waitForURL(/\/sso\?SAMLRequest=/), page.click('a:has-text("Sign in with Acme ADFS")')]);
  await page.fill('input[name=username]', username);
  await page.fill('input[name=password]', password);
  // The IdP's page posts the response to the ACS by itself (HTTP-POST binding).
  await page.click('button:has-text("Sign in")');
}

test('SAML: the IdP posts a signed assertion to the ACS and the user lands in the portal; a wrapped one is refused', async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  await samlSignIn(page, 'sam', 'sam-pw');
  await page.waitForURL(/\/portal/);
  assert.match(await page.textContent('body'), /Sam Saml/);
  await page.waitForSelector('[data-testid=quota-table]');
  assert.match(await page.textContent('[data-testid=quota-table]'), /ml-research/);
  await shot(page, 'portal-after-saml');
  await context.close();

  const other = await browser.newContext();
  const page2 = await other.newPage();
  await fetch(`${SAML}/__test/tamper`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ mode: 'wrapping' }) });
  await samlSignIn(page2, 'sam', 'sam-pw');
  await page2.waitForURL(/\/t\/acme\/login\?error=sso_token/);
  assert.match(await page2.textContent('[role=alert]'), /could not be verified/);
  assert.ok(!(await other.cookies()).some((c) => c.name === 'sy_session'), 'no session cookie');
  await shot(page2, 'saml-refused');
  await other.close();
});
after(async () => { await browser?.close(); });

async function oidcSignIn(page, username, password) {
  await page.goto(`${BASE}/t/acme/login`);
  await Promise.all([page.waitForURL(/\/interaction\//), page.click('a:has-text("Sign in with Acme Okta")')]);
  await page.fill('input[name=username]', username);
  await page.fill('input[name=password]', password);
  await page.click('button:has-text("Sign in")');
}

test('the tenant sign-in page offers SSO before and after hydration; OIDC signs a new user in with their groups', async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  await page.goto(`${BASE}/t/acme/login`);
  // Server-rendered: the buttons and the forms are there before the WASM runs.
  // (hydration markers `<!>` sit between text nodes)
  const html = (await (await fetch(`${BASE}/t/acme/login`)).text()).replaceAll('<!>', '');
  assert.match(html, /Sign in with Acme Okta/);
  assert.match(html, /Directory password/);
  await hydrated(page);
  await shot(page, 'tenant-login');

  await oidcSignIn(page, 'olivia', 'olivia-pw');
  await page.waitForURL(/\/portal/);
  const body = await page.textContent('body');
  assert.match(body, /Olivia Ops/);
  // Her IdP group ml-research became her Switchyard group: its quota shows in the portal.
  await page.waitForSelector('[data-testid=quota-table]');
  assert.match(await page.textContent('[data-testid=quota-table]'), /ml-research/);
  await shot(page, 'portal-after-oidc');
  await context.close();
});

test('a tampered ID token and a wrong directory password end on the sign-in page with no session', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await fetch(`${OIDC}/__test/tamper`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ mode: 'other_key' }) });
  await oidcSignIn(page, 'olivia', 'olivia-pw');
  await page.waitForURL(/\/t\/acme\/login\?error=sso_token/);
  assert.match(await page.textContent('[role=alert]'), /could not be verified/);
  await shot(page, 'oidc-refused');
  // Not signed in: a page that needs a session sends us to sign in.
  await page.goto(`${BASE}/portal`);
  await page.waitForURL(/\/login/);

  await page.goto(`${BASE}/t/acme/login`);
  await page.fill(`#ldap-${names.ldap}-username`, 'eve');
  await page.fill(`#ldap-${names.ldap}-password`, 'not-her-password');
  await Promise.all([page.waitForURL(/error=invalid/), page.click('button:has-text("Sign in with Acme Directory")')]);
  assert.match(await page.textContent('[role=alert]'), /Wrong organization, username or password/);
  await context.close();
});

test('LDAP signs a directory user in from the same page', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${BASE}/t/acme/login`);
  await page.fill(`#ldap-${names.ldap}-username`, 'eve');
  await page.fill(`#ldap-${names.ldap}-password`, 'eve-pw');
  await Promise.all([page.waitForURL(/\/portal/), page.click('button:has-text("Sign in with Acme Directory")')]);
  assert.match(await page.textContent('body'), /Eve Outsider/);
  await context.close();
});

test('a tenant admin sees the providers, tests a connection and gets field errors on the settings page', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const page = await context.newPage();
  await page.goto(`${BASE}/login`);
  await page.fill('#tenant', 'acme');
  await page.fill('#username', 'alice');
  await page.fill('#password', PASSWORD);
  await Promise.all([page.waitForURL(/\/portal/), page.click('button[type=submit]')]);
  await page.goto(`${BASE}/settings/sso`);
  // Before hydration: the table is in the HTML.
  await page.waitForSelector(`[data-idp="${names.oidc}"]`);
  assert.match(await page.textContent('[data-testid=idp-table]'), /\/auth\/oidc\/callback/);
  assert.match(await page.textContent(`[data-idp="${SAML_NAME}"]`), new RegExp(`/auth/saml/acme/${SAML_NAME}/acs`));
  await hydrated(page);

  await page.locator(`[data-idp="${names.oidc}"] button:has-text("Test connection")`).click();
  await page.waitForSelector(`[data-idp="${names.oidc}"] [data-testid=idp-checks]`);
  const checks = page.locator(`[data-idp="${names.oidc}"] [data-testid=idp-checks] li`);
  assert.ok(await checks.count() >= 3);
  assert.equal(await page.locator(`[data-idp="${names.oidc}"] [data-testid=idp-checks] li[data-ok=false]`).count(), 0,
    await page.textContent(`[data-idp="${names.oidc}"]`));
  await page.locator(`[data-idp="${names.ldap}"] button:has-text("Test connection")`).click();
  await page.waitForSelector(`[data-idp="${names.ldap}"] [data-testid=idp-checks] li[data-ok=true]`);
  await page.locator(`[data-idp="${SAML_NAME}"] button:has-text("Test connection")`).click();
  await page.waitForSelector(`[data-idp="${SAML_NAME}"] [data-testid=idp-checks]`);
  assert.equal(await page.locator(`[data-idp="${SAML_NAME}"] [data-testid=idp-checks] li[data-ok=false]`).count(), 0,
    await page.textContent(`[data-idp="${SAML_NAME}"]`));

  // A wrong issuer is refused at its field.
  await page.fill('#oidc-name', unique('bad'));
  await page.fill('#oidc-display', 'Bad');
  await page.fill('#oidc-issuer', 'ftp://idp.example.com');
  await page.fill('#oidc-client-id', 'x');
  await page.click('button:has-text("Add provider")');
  await page.waitForSelector('[data-field-error="oidc.issuer"]');
  assert.match(await page.textContent('[data-field-error="oidc.issuer"]'), /https/);
  await shot(page, 'sso-settings');

  // A provider no longer wanted is removed from its row, after a confirmation.
  const doomed = unique('old');
  const made = await api('POST', '/idp', {
    name: doomed, display_name: 'Old SSO', kind: 'oidc',
    oidc: { issuer: OIDC, client_id: 'switchyard' }, client_secret: 'switchyard-oidc-secret',
  });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  await page.reload();
  await hydrated(page);
  await page.click(`[data-idp="${doomed}"] a:has-text("Remove")`);
  await page.click('button:has-text("Delete provider Old SSO")');
  await page.waitForSelector(`[data-idp="${doomed}"]`, { state: 'detached' });
  assert.ok(!(await api('GET', '/idp')).body.some((p) => p.name === doomed), 'gone from the API too');

  // The IdP put olivia into ml-research: the group page lists her, and her page says what she can do.
  await page.goto(`${BASE}/settings`);
  await page.click('a:has-text("ml-research")');
  await page.waitForSelector('[data-testid=members-table]');
  await page.click('[data-testid=members-table] a:has-text("olivia")');
  await page.waitForSelector('[data-testid=grants-table]');
  const grants = await page.textContent('[data-testid=grants-table]');
  assert.match(grants, /queue/);
  assert.match(grants, /use/);
  assert.match(grants, /ml-research/);
  assert.match(await page.textContent('[data-testid=user-groups]'), /ml-research/);
  await shot(page, 'user-access');
  await context.close();
});
