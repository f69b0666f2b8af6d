#!/usr/bin/env node
// A real OpenID Connect provider for the end-to-end suite.
//
// Built on `oidc-provider` (panva, OpenID Certified). Everything protocol-
// related (discovery, /auth, /token, /me, /jwks, PKCE, single-use codes,
// sessions, cookies) is the library's own code; this file only supplies the
// configuration, an in-memory account seed, a minimal login page (the
// "interaction"), and a few test-only hooks under /__test/.
//
// Usage:  node end2end/idp/oidc-provider.mjs
//
// Environment:
//   OIDC_PORT     port on 127.0.0.1 (default 4011); issuer is http://127.0.0.1:<port>
//   OIDC_CLIENTS  JSON array of {client_id, client_secret, redirect_uris:[...]}
//                 (extra registration metadata such as post_logout_redirect_uris
//                 is passed through to oidc-provider unchanged)
//   OIDC_USERS    JSON array of {sub, username, password, email, name, groups:[...]}
//
// Routes besides the provider's own (see /.well-known/openid-configuration):
//   GET  /interaction/:uid         login form (username, password, "Sign in")
//   POST /interaction/:uid/login   form target; checks the password against the seed
//   GET  /__test/health            200 "ok"
//   POST /__test/groups            {"username", "groups": [...]}: change a user's groups
//   GET  /__test/tamper            current tamper mode as JSON
//   POST /__test/tamper            {"mode": "..."}: alter the id_token of the NEXT
//                                  successful token response (then back to "none").
//                                  `rotated` is a key rotation, not a forgery: the token
//                                  is signed by a new key under a new kid, and from then on
//                                  /jwks publishes that key beside the first one.
//
// Prints exactly one line to stdout when listening:
//   oidc-provider ready at http://127.0.0.1:<port>

import { createServer } from 'node:http';
import { randomBytes } from 'node:crypto';
import {
  generateKeyPair, exportJWK, decodeJwt, decodeProtectedHeader, SignJWT,
} from 'jose';

// --- oidc-provider import -----------------------------------------------------
// oidc-provider 9.x prints "Unsupported runtime. Use Node.js v22.x LTS" on
// Node 20 when the module is first evaluated. The provider works on Node 20
// (the flow is exercised by the e2e suite); drop just that one line so the
// test logs stay clean. Anything else it warns about still gets through.
const { default: Provider, errors: oidcErrors } = await (async () => {
  const originalWarn = console.warn;
  console.warn = (...args) => {
    if (typeof args[0] === 'string' && args[0].includes('Unsupported runtime')) return;
    originalWarn(...args);
  };
  try {
    return await import('oidc-provider');
  } finally {
    console.warn = originalWarn;
  }
})();

// --- settings -----------------------------------------------------------------

const PORT = Number.parseInt(process.env.OIDC_PORT || '4011', 10);
if (!Number.isInteger(PORT) || PORT < 1 || PORT > 65535) {
  console.error(`oidc-provider: invalid OIDC_PORT ${JSON.stringify(process.env.OIDC_PORT)}`);
  process.exit(2);
}
const HOST = '127.0.0.1';
const ISSUER = `http://${HOST}:${PORT}`;

const DEFAULT_CLIENTS = [{
  client_id: 'switchyard',
  client_secret: 'switchyard-oidc-secret',
  redirect_uris: ['http://127.0.0.1:3000/auth/oidc/callback'],
}];

const DEFAULT_USERS = [
  {
    sub: 'u-alice', username: 'alice', password: 'alice-pw', email: 'alice@acme.test', name: 'Alice Admin', groups: ['ml-research', 'platform-admins'],
  },
  {
    sub: 'u-bob', username: 'bob', password: 'bob-pw', email: 'bob@acme.test', name: 'Bob Builder', groups: ['ml-research'],
  },
  {
    sub: 'u-eve', username: 'eve', password: 'eve-pw', email: 'eve@acme.test', name: 'Eve Outsider', groups: [],
  },
];

function jsonEnv(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  let value;
  try {
    value = JSON.parse(raw);
  } catch (err) {
    console.error(`oidc-provider: ${name} is not valid JSON: ${err.message}`);
    process.exit(2);
  }
  if (!Array.isArray(value)) {
    console.error(`oidc-provider: ${name} must be a JSON array`);
    process.exit(2);
  }
  return value;
}

const clientSeed = jsonEnv('OIDC_CLIENTS', DEFAULT_CLIENTS);
const userSeed = jsonEnv('OIDC_USERS', DEFAULT_USERS);

for (const c of clientSeed) {
  if (!c || typeof c.client_id !== 'string' || typeof c.client_secret !== 'string'
      || !Array.isArray(c.redirect_uris) || c.redirect_uris.length === 0) {
    console.error('oidc-provider: every OIDC_CLIENTS entry needs client_id, client_secret and a non-empty redirect_uris');
    process.exit(2);
  }
}
for (const u of userSeed) {
  if (!u || typeof u.sub !== 'string' || typeof u.username !== 'string' || typeof u.password !== 'string') {
    console.error('oidc-provider: every OIDC_USERS entry needs string sub, username and password');
    process.exit(2);
  }
}

// Registered clients. Code flow only. token_endpoint_auth_method is
// client_secret_basic; oidc-provider 9 accepts client_secret_post from such a
// client too (both are "client secret" methods), so either works at /token.
const clients = clientSeed.map((c) => ({
  ...c,
  grant_types: ['authorization_code'],
  response_types: ['code'],
  token_endpoint_auth_method: c.token_endpoint_auth_method || 'client_secret_basic',
}));

const usersBySub = new Map(userSeed.map((u) => [u.sub, u]));
const usersByName = new Map(userSeed.map((u) => [u.username, u]));

// --- keys ---------------------------------------------------------------------
// A fresh RS256 signing key per run, published at /jwks. A second RSA key with
// the SAME kid is kept for the `other_key` tamper mode.

const SIGNING_KID = `switchyard-test-${randomBytes(4).toString('hex')}`;
const signingPair = await generateKeyPair('RS256', { extractable: true });
const otherPair = await generateKeyPair('RS256', { extractable: true });
const signingJwk = {
  ...(await exportJWK(signingPair.privateKey)), kid: SIGNING_KID, alg: 'RS256', use: 'sig',
};
// The key the IdP "rotates" to (tamper mode `rotated`), published only after the rotation.
const ROTATED_KID = `${SIGNING_KID}-next`;
const rotatedPair = await generateKeyPair('RS256', { extractable: true });
let rotatedPublished = false;
const publicJwks = async () => ({
  keys: [
    { ...(await exportJWK(signingPair.publicKey)), kid: SIGNING_KID, alg: 'RS256', use: 'sig' },
    { ...(await exportJWK(rotatedPair.publicKey)), kid: ROTATED_KID, alg: 'RS256', use: 'sig' },
  ],
});

// --- storage ------------------------------------------------------------------
// A small in-memory adapter (the library's built-in one is the same idea but
// logs a "development-only" warning on every start). State is lost on exit,
// which is what a test IdP wants.

const stores = new Map(); // model name -> Map(id -> { payload, expiresAt })
const sessionUids = new Map(); // session uid -> session id
const grantMembers = new Map(); // grantId -> Set of [model, id]

class MemoryAdapter {
  constructor(model) {
    this.model = model;
    if (!stores.has(model)) stores.set(model, new Map());
    this.store = stores.get(model);
  }

  get(id) {
    const entry = this.store.get(id);
    if (!entry) return undefined;
    if (entry.expiresAt !== undefined && entry.expiresAt <= Date.now()) {
      this.store.delete(id);
      return undefined;
    }
    return entry.payload;
  }

  async upsert(id, payload, expiresIn) {
    const expiresAt = typeof expiresIn === 'number' ? Date.now() + expiresIn * 1000 : undefined;
    this.store.set(id, { payload, expiresAt });
    if (this.model === 'Session' && payload.uid) sessionUids.set(payload.uid, id);
    if (payload.grantId) {
      if (!grantMembers.has(payload.grantId)) grantMembers.set(payload.grantId, new Set());
      grantMembers.get(payload.grantId).add(`${this.model}\u0000${id}`);
    }
  }

  async find(id) {
    return this.get(id);
  }

  async findByUid(uid) {
    const id = sessionUids.get(uid);
    return id === undefined ? undefined : this.get(id);
  }

  async findByUserCode(userCode) {
    for (const id of this.store.keys()) {
      const payload = this.get(id);
      if (payload?.userCode === userCode) return payload;
    }
    return undefined;
  }

  async consume(id) {
    const payload = this.get(id);
    if (payload) payload.consumed = Math.floor(Date.now() / 1000);
  }

  async destroy(id) {
    const payload = this.store.get(id)?.payload;
    this.store.delete(id);
    if (payload?.uid && sessionUids.get(payload.uid) === id) sessionUids.delete(payload.uid);
  }

  async revokeByGrantId(grantId) {
    const members = grantMembers.get(grantId);
    if (!members) return;
    for (const member of members) {
      const [model, id] = member.split('\u0000');
      stores.get(model)?.delete(id);
    }
    grantMembers.delete(grantId);
  }
}

// --- HTML ---------------------------------------------------------------------

function htmlEscape(value) {
  return String(value ?? '').replace(/[&<>"']/g, (ch) => ({
    '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;',
  }[ch]));
}

function page(title, body) {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${htmlEscape(title)}</title>
<style>
  body { font-family: system-ui, sans-serif; background: #f4f4f5; margin: 0; }
  main { max-width: 22rem; margin: 4rem auto; background: #fff; padding: 2rem; border-radius: 8px; box-shadow: 0 1px 3px rgba(0,0,0,.15); }
  h1 { font-size: 1.25rem; margin-top: 0; }
  label { display: block; margin: .75rem 0 .25rem; font-size: .9rem; }
  input { width: 100%; box-sizing: border-box; padding: .5rem; font-size: 1rem; }
  button { margin-top: 1.25rem; width: 100%; padding: .6rem; font-size: 1rem; }
  .error { color: #b91c1c; background: #fef2f2; padding: .5rem; border-radius: 4px; }
  pre { white-space: pre-wrap; word-break: break-word; }
</style>
</head>
<body><main>
${body}
</main></body>
</html>`;
}

function loginPage({ uid, clientId, username = '', error }) {
  return page('Sign in - Test IdP', `<h1>Sign in to Test IdP</h1>
<p>Client: <code>${htmlEscape(clientId)}</code></p>
${error ? `<p class="error" role="alert">${htmlEscape(error)}</p>` : ''}
<form method="post" action="/interaction/${encodeURIComponent(uid)}/login" autocomplete="off">
  <label for="username">Username</label>
  <input id="username" name="username" type="text" value="${htmlEscape(username)}" required autofocus>
  <label for="password">Password</label>
  <input id="password" name="password" type="password" required>
  <button type="submit">Sign in</button>
</form>`);
}

// Error page for the provider's own errors (the default one pulls a web font
// from the internet, which the test machines cannot reach).
async function renderError(ctx, out) {
  ctx.type = 'html';
  ctx.body = page('Error - Test IdP', `<h1>Something went wrong</h1>
${Object.entries(out).map(([k, v]) => `<pre><strong>${htmlEscape(k)}</strong>: ${htmlEscape(v)}</pre>`).join('\n')}`);
}

// --- provider configuration ---------------------------------------------------

const configuration = {
  adapter: MemoryAdapter,
  clients,
  jwks: { keys: [signingJwk] },

  async findAccount(ctx, sub) {
    const user = usersBySub.get(sub);
    if (!user) return undefined;
    return {
      accountId: sub,
      // oidc-provider filters these down to what the granted scopes allow.
      async claims() {
        return {
          sub: user.sub,
          email: user.email,
          email_verified: true,
          name: user.name,
          preferred_username: user.username,
          groups: Array.isArray(user.groups) ? user.groups : [],
        };
      },
    };
  },

  // Scope -> claims. Keys double as the supported scopes.
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username'],
    groups: ['groups'],
  },
  scopes: ['openid', 'profile', 'email', 'groups'],

  // Put scope-requested claims into the ID token as well, not only userinfo.
  conformIdTokenClaims: false,

  responseTypes: ['code'],
  clientAuthMethods: ['client_secret_basic', 'client_secret_post'],
  // PKCE for every authorization request (oidc-provider 9 supports S256 only,
  // and insists on code_challenge_method being sent).
  pkce: { required: () => true },

  features: {
    devInteractions: { enabled: false },
    userinfo: { enabled: true },
    revocation: { enabled: true },
  },

  interactions: {
    url: (ctx, interaction) => `/interaction/${interaction.uid}`,
  },

  cookies: {
    // Browsers share cookies between ports of one host, so the IdP on
    // 127.0.0.1:4011 and the app on 127.0.0.1:3000 see each other's cookies.
    // Prefix ours so they cannot collide with the app's.
    names: {
      session: 'idp_session',
      interaction: 'idp_interaction',
      resume: 'idp_interaction_resume',
    },
    // Signed cookies. The Secure flag is only set on https requests, so these
    // work on plain http; SameSite=Lax (the default) suits the redirect flow.
    keys: [randomBytes(32).toString('base64url')],
  },

  // Short but comfortable lifetimes for a test run (seconds).
  ttl: {
    AuthorizationCode: 60,
    AccessToken: 600,
    IdToken: 600,
    Interaction: 600,
    Session: 3600,
    Grant: 3600,
  },

  clientBasedCORS: () => false,
  renderError,
};

const provider = new Provider(ISSUER, configuration);

// Surface genuine server errors; protocol errors (invalid_grant etc.) are the
// client's business and are not logged.
provider.on('server_error', (ctx, err) => {
  console.error('oidc-provider server_error:', err);
});

// --- tamper hooks -------------------------------------------------------------

const TAMPER_MODES = new Set(['none', 'wrong_aud', 'expired', 'other_key', 'bad_nonce', 'wrong_iss', 'rotated']);
let tamperMode = 'none';

async function tamperIdToken(idToken, mode) {
  let header = decodeProtectedHeader(idToken);
  const claims = decodeJwt(idToken);
  let key = signingPair.privateKey;
  switch (mode) {
    case 'rotated':
      key = rotatedPair.privateKey;
      header = { ...header, kid: ROTATED_KID };
      rotatedPublished = true;
      break;
    case 'wrong_aud':
      claims.aud = 'someone-else';
      break;
    case 'expired':
      claims.iat -= 2 * 60 * 60;
      claims.exp -= 2 * 60 * 60;
      break;
    case 'other_key':
      key = otherPair.privateKey;
      break;
    case 'bad_nonce':
      claims.nonce = 'not-the-nonce';
      break;
    case 'wrong_iss':
      claims.iss = 'http://wrong-issuer.invalid';
      break;
    default:
      return idToken;
  }
  // Same protected header (alg RS256 and the real kid) as the original, except `rotated`.
  return new SignJWT(claims).setProtectedHeader(header).sign(key);
}

async function readBody(ctx, limit = 64 * 1024) {
  const chunks = [];
  let size = 0;
  for await (const chunk of ctx.req) {
    size += chunk.length;
    if (size > limit) ctx.throw(413, 'request body too large');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

// Runs before the provider's own routing (provider.use inserts ahead of it).
provider.use(async (ctx, next) => {
  if (ctx.path === '/jwks' && ctx.method === 'GET' && rotatedPublished) {
    ctx.type = 'application/jwk-set+json';
    ctx.body = await publicJwks();
    return;
  }
  if (ctx.path === '/__test/health' && ctx.method === 'GET') {
    ctx.type = 'text';
    ctx.body = 'ok';
    return;
  }

  // Change a seeded user's groups, as a directory admin would (revocation tests).
  if (ctx.path === '/__test/groups' && ctx.method === 'POST') {
    let body;
    try {
      body = JSON.parse(await readBody(ctx));
    } catch {
      body = null;
    }
    const user = body && usersByName.get(body.username);
    if (!user || !Array.isArray(body.groups) || !body.groups.every((g) => typeof g === 'string')) {
      ctx.status = 400;
      ctx.body = { error: 'body must be {"username": <seeded user>, "groups": [string]}' };
      return;
    }
    user.groups = body.groups;
    ctx.body = { username: user.username, groups: user.groups };
    return;
  }

  if (ctx.path === '/__test/tamper') {
    if (ctx.method === 'GET') {
      ctx.body = { mode: tamperMode };
      return;
    }
    if (ctx.method !== 'POST') {
      ctx.status = 405;
      ctx.body = { error: 'method not allowed' };
      return;
    }
    let mode;
    try {
      ({ mode } = JSON.parse(await readBody(ctx)));
    } catch {
      ctx.status = 400;
      ctx.body = { error: 'body must be JSON: {"mode": "..."}' };
      return;
    }
    if (!TAMPER_MODES.has(mode)) {
      ctx.status = 400;
      ctx.body = { error: `unknown mode; one of ${[...TAMPER_MODES].join(', ')}` };
      return;
    }
    tamperMode = mode;
    ctx.body = { mode };
    return;
  }

  await next();

  // Fault injection: rewrite the id_token of the next successful token
  // response. ctx.body is still the plain object oidc-provider built.
  if (tamperMode !== 'none' && ctx.path === '/token' && ctx.method === 'POST'
      && ctx.status === 200 && ctx.body && typeof ctx.body.id_token === 'string') {
    const mode = tamperMode;
    tamperMode = 'none';
    ctx.body = { ...ctx.body, id_token: await tamperIdToken(ctx.body.id_token, mode) };
  }
});

// --- interactions (login page, automatic consent) -----------------------------

provider.use(async (ctx, next) => {
  const match = /^\/interaction\/([^/]+)(\/login)?$/.exec(ctx.path);
  if (!match) {
    await next();
    return;
  }
  ctx.set('cache-control', 'no-store');
  const uidInPath = match[1];
  const isLogin = Boolean(match[2]);

  try {
    const details = await provider.interactionDetails(ctx.req, ctx.res);
    if (details.uid !== uidInPath) {
      throw new oidcErrors.SessionNotFound('interaction uid does not match the interaction cookie');
    }
    const { prompt, params } = details;

    if (!isLogin && ctx.method === 'GET') {
      if (prompt.name === 'login') {
        ctx.type = 'html';
        ctx.body = loginPage({ uid: details.uid, clientId: params.client_id });
        return;
      }
      if (prompt.name === 'consent') {
        // No consent screen: grant whatever is missing and carry on, exactly
        // like the library's example "confirm" handler does after a click.
        const { accountId } = details.session;
        const grant = details.grantId
          ? await provider.Grant.find(details.grantId)
          : new provider.Grant({ accountId, clientId: params.client_id });
        const { missingOIDCScope, missingOIDCClaims, missingResourceScopes } = prompt.details;
        if (missingOIDCScope) grant.addOIDCScope(missingOIDCScope.join(' '));
        if (missingOIDCClaims) grant.addOIDCClaims(missingOIDCClaims);
        if (missingResourceScopes) {
          for (const [indicator, scopes] of Object.entries(missingResourceScopes)) {
            grant.addResourceScope(indicator, scopes.join(' '));
          }
        }
        const grantId = await grant.save();
        const consent = details.grantId ? {} : { grantId };
        ctx.respond = false; // interactionFinished writes the 303 itself
        await provider.interactionFinished(ctx.req, ctx.res, { consent }, { mergeWithLastSubmission: true });
        return;
      }
      ctx.status = 400;
      await renderError(ctx, { error: 'invalid_request', error_description: `unsupported prompt ${prompt.name}` });
      return;
    }

    if (isLogin && ctx.method === 'POST') {
      if (prompt.name !== 'login') {
        ctx.status = 400;
        await renderError(ctx, { error: 'invalid_request', error_description: 'this interaction is not waiting for a login' });
        return;
      }
      const form = new URLSearchParams(await readBody(ctx));
      const username = form.get('username') ?? '';
      const password = form.get('password') ?? '';
      const user = usersByName.get(username);
      if (!user || user.password !== password) {
        ctx.type = 'html';
        ctx.body = loginPage({
          uid: details.uid, clientId: params.client_id, username, error: 'Invalid username or password',
        });
        return;
      }
      ctx.respond = false; // interactionFinished writes the 303 itself
      await provider.interactionFinished(ctx.req, ctx.res, { login: { accountId: user.sub } }, {
        mergeWithLastSubmission: false,
      });
      return;
    }

    ctx.status = 405;
    ctx.body = 'method not allowed';
  } catch (err) {
    if (err instanceof oidcErrors.SessionNotFound) {
      ctx.respond = true;
      ctx.status = err.status ?? 400;
      await renderError(ctx, { error: err.message, error_description: err.error_description });
      return;
    }
    throw err;
  }
});

// --- server -------------------------------------------------------------------

const server = createServer(provider.callback());

server.on('error', (err) => {
  console.error(`oidc-provider: cannot listen on ${HOST}:${PORT}: ${err.message}`);
  process.exit(1);
});

server.listen(PORT, HOST, () => {
  console.log(`oidc-provider ready at ${ISSUER}`);
});

function shutdown() {
  server.close(() => process.exit(0));
  server.closeAllConnections();
  // Never hang the test harness.
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
