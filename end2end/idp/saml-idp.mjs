#!/usr/bin/env node
// A real SAML 2.0 Identity Provider for the end-to-end suite.
//
// Built on `samlify` (IdP metadata, AuthnRequest parsing with XML-schema
// validation through `@authenio/samlify-xmllint-wasm`, and XML-DSig signing
// through samlify's SamlLib.constructSAMLSignature, which drives `xml-crypto`).
// The signing certificate is made at startup: the RSA key pair by node:crypto,
// the self-signed X.509 certificate around it by `node-forge` (pure JS, so no
// `openssl` binary is needed). This file supplies the configuration, the login
// page, the Response/Assertion XML, and a few test-only hooks under /__test/.
//
// The Response is built here rather than by samlify's createLoginResponse()
// because the fault-injection modes below need control over every field and
// over which parts get signed (samlify always signs something). The layout is
// samlify's default login-response template, extended with a multi-valued
// AttributeStatement.
//
// Usage:  node end2end/idp/saml-idp.mjs          (Node 20 or later)
//
// Environment:
//   SAML_PORT           port on 127.0.0.1 (default 4012).
//                       Entity ID: http://127.0.0.1:<port>/metadata
//   SAML_SPS            JSON array of {entity_id, acs_url}: the known service
//                       providers. AuthnRequests from any other Issuer are refused,
//                       and a Response only ever goes to its SP's acs_url.
//   SAML_USERS          JSON array of {username, password, email, name, groups:[...]}
//   SAML_SIGN_RESPONSE  "1": sign the whole <samlp:Response> as well (the assertion
//                       is always signed, except in the `unsigned` tamper mode).
//   SAML_GROUPS_AS_DN   "1": send each group as CN=<name>,OU=Groups,DC=acme,DC=test
//
// Routes:
//   GET  /metadata                 IdP metadata (EntityDescriptor; signing cert,
//                                  SingleSignOnService HTTP-Redirect and HTTP-POST at /sso)
//   GET  /sso?SAMLRequest=&RelayState=   HTTP-Redirect binding (raw DEFLATE + base64)
//   POST /sso  (form: SAMLRequest, RelayState)  HTTP-POST binding (base64, not deflated)
//        Both show the login form (username, password, "Sign in"; the original
//        SAMLRequest/RelayState/binding ride along in hidden fields).
//   POST /sso/login                login form target. Wrong password: the form again
//                                  with "Invalid username or password" (HTTP 401).
//                                  Success: an auto-submitting HTML form that POSTs
//                                  SAMLResponse (base64) and RelayState to the SP's ACS.
//   GET  /__test/health            200 "ok"
//   GET  /__test/tamper            {"mode": "..."}: the mode armed for the next response
//   POST /__test/tamper            {"mode": "..."}: alter the NEXT generated Response
//                                  only (then back to "none"); see TAMPER_MODES below
//   GET  /__test/last              the last SAMLResponse as XML (404 before the first)
//   GET  /__test/cert              the IdP signing certificate, PEM
//   POST /__test/groups            {"username", "groups": [...]}: change a user's groups
//   GET  /__test/config            {"sign_response", "groups_as_dn"}
//   POST /__test/config            same keys (booleans, each optional): change at run time
//
// There is no IdP session: every AuthnRequest shows the login form.
//
// Signatures: enveloped XML-DSig, RSA-SHA256 with SHA-256 digests, exclusive
// C14N; the <ds:Signature> sits right after the signed element's <saml:Issuer>
// and references it by its `ID` attribute; KeyInfo holds the X.509 certificate.
// Checking one by hand with xmlsec1 (Debian package xmlsec1), the metadata
// certificate saved from GET /__test/cert as cert.pem and the decoded
// response (GET /__test/last) as resp.xml:
//   xmlsec1 --verify --enabled-key-data key-name --pubkey-cert-pem cert.pem \
//     --id-attr:ID urn:oasis:names:tc:SAML:2.0:assertion:Assertion resp.xml
// (`--enabled-key-data key-name` makes xmlsec1 ignore the certificate in
// KeyInfo and use only cert.pem, as a service provider pinning the metadata
// key does.) With SAML_SIGN_RESPONSE=1 there are two signatures; add
//   --id-attr:ID urn:oasis:names:tc:SAML:2.0:protocol:Response
// and pick one with --node-xpath "/*[local-name()='Response']/*[local-name()='Signature']"
// or --node-xpath "//*[local-name()='Assertion']/*[local-name()='Signature']".
//
// Prints exactly one line to stdout when listening:
//   saml-idp ready at http://127.0.0.1:<port>
// Exits 0 on SIGTERM / SIGINT.

import { createServer } from 'node:http';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import samlify from 'samlify';
import xmllintValidator from '@authenio/samlify-xmllint-wasm';
import forge from 'node-forge';

// --- settings -----------------------------------------------------------------

function die(message) {
  console.error(`saml-idp: ${message}`);
  process.exit(2);
}

const PORT = Number.parseInt(process.env.SAML_PORT || '4012', 10);
if (!Number.isInteger(PORT) || PORT < 1 || PORT > 65535) {
  die(`invalid SAML_PORT ${JSON.stringify(process.env.SAML_PORT)}`);
}
const HOST = '127.0.0.1';
const BASE_URL = `http://${HOST}:${PORT}`;
const ENTITY_ID = `${BASE_URL}/metadata`;
const SSO_URL = `${BASE_URL}/sso`;

const DEFAULT_SPS = [{
  entity_id: 'http://127.0.0.1:3000/auth/saml/acme/corp/metadata',
  acs_url: 'http://127.0.0.1:3000/auth/saml/acs',
}];

const DEFAULT_USERS = [
  {
    username: 'alice', password: 'alice-pw', email: 'alice@acme.test', name: 'Alice Admin', groups: ['ml-research', 'platform-admins'],
  },
  {
    username: 'bob', password: 'bob-pw', email: 'bob@acme.test', name: 'Bob Builder', groups: ['ml-research'],
  },
  {
    username: 'eve', password: 'eve-pw', email: 'eve@acme.test', name: 'Eve Outsider', groups: [],
  },
];

function jsonEnv(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  let value;
  try {
    value = JSON.parse(raw);
  } catch (err) {
    die(`${name} is not valid JSON: ${err.message}`);
  }
  if (!Array.isArray(value)) die(`${name} must be a JSON array`);
  return value;
}

function flagEnv(name) {
  return ['1', 'true', 'yes', 'on'].includes(String(process.env[name] || '').trim().toLowerCase());
}

const spSeed = jsonEnv('SAML_SPS', DEFAULT_SPS);
const userSeed = jsonEnv('SAML_USERS', DEFAULT_USERS);

for (const sp of spSeed) {
  if (!sp || typeof sp.entity_id !== 'string' || !sp.entity_id
      || typeof sp.acs_url !== 'string' || !/^https?:\/\//.test(sp.acs_url)) {
    die('every SAML_SPS entry needs a string entity_id and an http(s) acs_url');
  }
}
for (const u of userSeed) {
  if (!u || typeof u.username !== 'string' || !u.username || typeof u.password !== 'string') {
    die('every SAML_USERS entry needs string username and password');
  }
  if (u.groups !== undefined && !(Array.isArray(u.groups) && u.groups.every((g) => typeof g === 'string'))) {
    die(`SAML_USERS entry ${u.username}: groups must be an array of strings`);
  }
}

const usersByName = new Map(userSeed.map((u) => [u.username, { ...u, groups: [...(u.groups || [])] }]));

// Mutable at run time through POST /__test/config.
const config = {
  sign_response: flagEnv('SAML_SIGN_RESPONSE'),
  groups_as_dn: flagEnv('SAML_GROUPS_AS_DN'),
};

// --- SAML constants -------------------------------------------------------------

const NS_PROTOCOL = 'urn:oasis:names:tc:SAML:2.0:protocol';
const NS_ASSERTION = 'urn:oasis:names:tc:SAML:2.0:assertion';
const BINDING_REDIRECT = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect';
const BINDING_POST = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST';
// NameID is the username, which is not an e-mail address: format "unspecified".
const NAMEID_FORMAT = 'urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified';
const ATTRNAME_FORMAT = 'urn:oasis:names:tc:SAML:2.0:attrname-format:basic';
const STATUS_SUCCESS = 'urn:oasis:names:tc:SAML:2.0:status:Success';
const AUTHN_CONTEXT = 'urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport';
const CM_BEARER = 'urn:oasis:names:tc:SAML:2.0:cm:bearer';
const RSA_SHA256 = 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256';
const TRANSFORMS = [
  'http://www.w3.org/2000/09/xmldsig#enveloped-signature',
  'http://www.w3.org/2001/10/xml-exc-c14n#',
];

const ASSERTION_XPATH = "/*[local-name(.)='Response']/*[local-name(.)='Assertion']";
const ASSERTION_ISSUER_XPATH = `${ASSERTION_XPATH}/*[local-name(.)='Issuer']`;
const RESPONSE_ISSUER_XPATH = "/*[local-name(.)='Response']/*[local-name(.)='Issuer']";

// --- keys -----------------------------------------------------------------------
// A fresh RSA-2048 key and self-signed certificate per run; the certificate is
// published in /metadata. A second, unrelated key/certificate pair is kept for
// the `other_key` tamper mode.

function makeKeyAndCert(commonName) {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const cert = forge.pki.createCertificate();
  cert.publicKey = forge.pki.publicKeyFromPem(publicKey.export({ type: 'spki', format: 'pem' }));
  // Positive serial (leading 01 byte), random otherwise.
  cert.serialNumber = `01${randomBytes(8).toString('hex')}`;
  cert.validity.notBefore = new Date(Date.now() - 24 * 60 * 60 * 1000);
  cert.validity.notAfter = new Date(Date.now() + 10 * 365 * 24 * 60 * 60 * 1000);
  const subject = [{ name: 'commonName', value: commonName }, { name: 'organizationName', value: 'Switchyard tests' }];
  cert.setSubject(subject);
  cert.setIssuer(subject);
  cert.setExtensions([
    { name: 'basicConstraints', cA: false },
    { name: 'keyUsage', digitalSignature: true, nonRepudiation: true },
  ]);
  const privatePkcs1 = privateKey.export({ type: 'pkcs1', format: 'pem' });
  cert.sign(forge.pki.privateKeyFromPem(privatePkcs1), forge.md.sha256.create());
  const certPem = forge.pki.certificateToPem(cert);
  return {
    keyPem: privatePkcs1,
    certPem,
    // Bare base64 DER, as it goes into <ds:X509Certificate>.
    certB64: certPem.replace(/-----(BEGIN|END) CERTIFICATE-----/g, '').replace(/\s+/g, ''),
  };
}

const signing = makeKeyAndCert('Switchyard test SAML IdP');
const otherSigning = makeKeyAndCert('Switchyard test SAML IdP (other key)');

// --- samlify entities -------------------------------------------------------------

// samlify refuses to parse anything without a schema validator. This one is
// libxml2's xmllint compiled to WebAssembly (runs in a worker thread, ~0.1 s a
// document) with the SAML 2.0 protocol/assertion, xmldsig and xenc schemas.
// (@authenio/samlify-node-xmllint, the older emscripten build, prints a blank
// line to stdout and leaks process listeners on every call: not used.)
// On a schema failure it logs the xmllint result with console.debug, which
// goes to stdout; send that to stderr so stdout only carries the ready line.
console.debug = (...args) => console.error(...args);
samlify.setSchemaValidator(xmllintValidator);

// samlify warns on construction that there is no SingleLogoutService (this IdP
// has none). Drop just that line.
function quietly(fn) {
  const originalWarn = console.warn;
  console.warn = (...args) => {
    if (typeof args[0] === 'string' && args[0].includes('missing endpoint of SingleLogoutService')) return;
    originalWarn(...args);
  };
  try {
    return fn();
  } finally {
    console.warn = originalWarn;
  }
}

const idp = quietly(() => samlify.IdentityProvider({
  entityID: ENTITY_ID,
  signingCert: signing.certPem,
  privateKey: signing.keyPem,
  wantAuthnRequestsSigned: false, // requests may be signed; the signature is not checked
  nameIDFormat: [NAMEID_FORMAT],
  singleSignOnService: [
    { Binding: BINDING_REDIRECT, Location: SSO_URL },
    { Binding: BINDING_POST, Location: SSO_URL },
  ],
}));
const METADATA_XML = idp.getMetadata();

// entity_id -> { entityId, acsUrl, sp (samlify ServiceProvider) }
const sps = new Map(spSeed.map((s) => [s.entity_id, {
  entityId: s.entity_id,
  acsUrl: s.acs_url,
  sp: quietly(() => samlify.ServiceProvider({
    entityID: s.entity_id,
    authnRequestsSigned: false,
    wantAssertionsSigned: true,
    assertionConsumerService: [{ Binding: BINDING_POST, Location: s.acs_url }],
  })),
}]));

// --- small helpers ------------------------------------------------------------------

function xmlEscape(value) {
  return String(value ?? '').replace(/[&<>"']/g, (ch) => ({
    '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;',
  }[ch]));
}

function htmlEscape(value) {
  return String(value ?? '').replace(/[&<>"']/g, (ch) => ({
    '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;',
  }[ch]));
}

// SAML IDs are xs:ID (an NCName: must not start with a digit).
function newId() {
  return `_${randomBytes(20).toString('hex')}`;
}

// xs:dateTime in UTC, whole seconds (no milliseconds: the most portable form).
function samlTime(ms) {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

// Base64 from a query string or a form: '+' may have been turned into ' ' by
// a client that did not percent-encode it; base64 never contains spaces.
function normaliseBase64(value) {
  return String(value || '').replace(/ /g, '+').replace(/[\r\n\t]/g, '');
}

// --- HTML -----------------------------------------------------------------------------

function page(title, body, { extraHead = '', bodyAttrs = '' } = {}) {
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
  code { word-break: break-all; }
</style>
${extraHead}
</head>
<body${bodyAttrs}><main>
${body}
</main></body>
</html>`;
}

function hidden(name, value) {
  if (value === undefined || value === null || value === '') return '';
  return `<input type="hidden" name="${htmlEscape(name)}" value="${htmlEscape(value)}">`;
}

function loginPage({ spEntityId, samlRequest, relayState, binding, username = '', error }) {
  return page('Sign in - Test SAML IdP', `<h1>Sign in to Test SAML IdP</h1>
<p>Service provider: <code>${htmlEscape(spEntityId)}</code></p>
${error ? `<p class="error" role="alert">${htmlEscape(error)}</p>` : ''}
<form method="post" action="/sso/login" autocomplete="off">
  ${hidden('SAMLRequest', samlRequest)}
  ${hidden('RelayState', relayState)}
  ${hidden('binding', binding)}
  <label for="username">Username</label>
  <input id="username" name="username" type="text" value="${htmlEscape(username)}" required autofocus>
  <label for="password">Password</label>
  <input id="password" name="password" type="password" required>
  <button type="submit">Sign in</button>
</form>`);
}

// HTTP-POST binding (saml-bindings 3.5): a form that submits itself to the ACS.
// The button is there for browsers without JavaScript.
function autoPostPage({ acsUrl, samlResponse, relayState }) {
  return page('Signing in... - Test SAML IdP', `<h1>Signing you in...</h1>
<form id="saml-post" method="post" action="${htmlEscape(acsUrl)}">
  ${hidden('SAMLResponse', samlResponse)}
  ${hidden('RelayState', relayState)}
  <noscript><p>JavaScript is off: press Continue to finish signing in.</p></noscript>
  <button type="submit">Continue</button>
</form>
<script>document.getElementById('saml-post').submit();</script>`);
}

function errorPage(title, detail) {
  return page(`${title} - Test SAML IdP`, `<h1>${htmlEscape(title)}</h1>
<p class="error" role="alert">${htmlEscape(detail)}</p>`);
}

// --- AuthnRequest parsing --------------------------------------------------------------

class HttpError extends Error {
  constructor(status, title, detail) {
    super(detail);
    this.status = status;
    this.title = title;
  }
}

// Decodes and checks an AuthnRequest as received in either binding, finds the
// SP by its Issuer, and has samlify parse it. Returns
// { spEntry, id, acsUrl, samlRequest (as received), binding }.
async function parseAuthnRequest(samlRequestRaw, binding) {
  const samlRequest = normaliseBase64(samlRequestRaw);
  if (!samlRequest) throw new HttpError(400, 'Bad request', 'SAMLRequest is missing');

  // 1. Decode just far enough to learn the Issuer (samlify needs the SP first).
  let xml;
  try {
    const bytes = Buffer.from(samlRequest, 'base64');
    xml = binding === 'redirect'
      ? samlify.Utility.inflateString(samlRequest)
      : bytes.toString('utf8');
    if (!xml.trim().startsWith('<')) throw new Error('not XML');
  } catch (err) {
    const how = binding === 'redirect' ? 'base64 + raw DEFLATE' : 'base64';
    throw new HttpError(400, 'Bad request', `SAMLRequest is not ${how} encoded XML (${err.message})`);
  }
  // xmldom, as samlify configures it (no external entities); the schema check
  // follows in step 2.
  let peek;
  try {
    peek = samlify.Extractor.extract(xml, samlify.Extractor.loginRequestFields);
  } catch (err) {
    throw new HttpError(400, 'Bad request', `SAMLRequest is not well-formed XML (${err.message})`);
  }
  const issuer = typeof peek.issuer === 'string' ? peek.issuer.trim() : '';
  if (!peek.request || !issuer) {
    throw new HttpError(400, 'Bad request', 'SAMLRequest is not an AuthnRequest with an Issuer');
  }
  const spEntry = sps.get(issuer);
  if (!spEntry) {
    throw new HttpError(403, 'Unknown service provider', `No service provider is registered with entity ID ${issuer}`);
  }

  // 2. The library's own parse, against that SP.
  let parsed;
  try {
    parsed = binding === 'redirect'
      ? await idp.parseLoginRequest(spEntry.sp, 'redirect', { query: { SAMLRequest: samlRequest } })
      : await idp.parseLoginRequest(spEntry.sp, 'post', { body: { SAMLRequest: samlRequest } });
  } catch (err) {
    const why = String(err?.message || err);
    throw new HttpError(400, 'Bad request', why === 'ERR_INVALID_XML'
      ? 'AuthnRequest does not validate against the SAML 2.0 schema (xmllint output on the IdP stderr)'
      : `AuthnRequest rejected: ${why}`);
  }
  const request = parsed.extract.request || {};
  const id = request.id;
  if (!id) throw new HttpError(400, 'Bad request', 'AuthnRequest has no ID');

  // 3. The response goes to the registered ACS URL only. A request that names
  // another one is refused rather than silently redirected.
  const askedAcs = request.assertionConsumerServiceUrl || request.assertionConsumerServiceURL;
  if (askedAcs && askedAcs !== spEntry.acsUrl) {
    throw new HttpError(403, 'Unregistered ACS URL', `AssertionConsumerServiceURL ${askedAcs} is not registered for ${issuer}`);
  }
  return {
    spEntry, id, acsUrl: spEntry.acsUrl, samlRequest, binding,
  };
}

// --- Response building -------------------------------------------------------------------

function groupValue(name, asDn) {
  return asDn ? `CN=${name},OU=Groups,DC=acme,DC=test` : name;
}

function attributeXml(name, values) {
  const vals = values.map((v) => `<saml:AttributeValue xsi:type="xs:string">${xmlEscape(v)}</saml:AttributeValue>`).join('');
  return `<saml:Attribute Name="${xmlEscape(name)}" NameFormat="${ATTRNAME_FORMAT}">${vals}</saml:Attribute>`;
}

// One <saml:Assertion>. Attributes: email, displayName (single-valued) and
// groups (multi-valued, one AttributeValue per group; left out when the user
// has no groups).
function assertionXml(f) {
  const attrs = [];
  if (f.user.email) attrs.push(attributeXml('email', [f.user.email]));
  if (f.user.name) attrs.push(attributeXml('displayName', [f.user.name]));
  const groups = (f.user.groups || []).map((g) => groupValue(g, f.groupsAsDn));
  if (groups.length > 0) attrs.push(attributeXml('groups', groups));
  return `<saml:Assertion xmlns:saml="${NS_ASSERTION}" xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" ID="${f.assertionId}" Version="2.0" IssueInstant="${f.issueInstant}">`
    + `<saml:Issuer>${xmlEscape(f.issuer)}</saml:Issuer>`
    + '<saml:Subject>'
    + `<saml:NameID Format="${NAMEID_FORMAT}">${xmlEscape(f.nameId)}</saml:NameID>`
    + `<saml:SubjectConfirmation Method="${CM_BEARER}">`
    + `<saml:SubjectConfirmationData NotOnOrAfter="${f.scdNotOnOrAfter}" Recipient="${xmlEscape(f.recipient)}" InResponseTo="${xmlEscape(f.inResponseTo)}"/>`
    + '</saml:SubjectConfirmation>'
    + '</saml:Subject>'
    + `<saml:Conditions NotBefore="${f.notBefore}" NotOnOrAfter="${f.notOnOrAfter}">`
    + `<saml:AudienceRestriction><saml:Audience>${xmlEscape(f.audience)}</saml:Audience></saml:AudienceRestriction>`
    + '</saml:Conditions>'
    + `<saml:AuthnStatement AuthnInstant="${f.issueInstant}" SessionIndex="${f.sessionIndex}">`
    + `<saml:AuthnContext><saml:AuthnContextClassRef>${AUTHN_CONTEXT}</saml:AuthnContextClassRef></saml:AuthnContext>`
    + '</saml:AuthnStatement>'
    + (attrs.length > 0 ? `<saml:AttributeStatement>${attrs.join('')}</saml:AttributeStatement>` : '')
    + '</saml:Assertion>';
}

// <samlp:Response> around the given assertion XML (and optional Extensions XML).
function responseXml(f, innerXml, extensionsXml = '') {
  return `<samlp:Response xmlns:samlp="${NS_PROTOCOL}" xmlns:saml="${NS_ASSERTION}" ID="${f.responseId}" Version="2.0" IssueInstant="${f.issueInstant}" Destination="${xmlEscape(f.destination)}" InResponseTo="${xmlEscape(f.inResponseTo)}">`
    + `<saml:Issuer>${xmlEscape(f.issuer)}</saml:Issuer>`
    + (extensionsXml ? `<samlp:Extensions>${extensionsXml}</samlp:Extensions>` : '')
    + `<samlp:Status><samlp:StatusCode Value="${STATUS_SUCCESS}"/></samlp:Status>`
    + innerXml
    + '</samlp:Response>';
}

// Enveloped XML-DSig (RSA-SHA256, SHA-256 digest, exclusive C14N for both
// SignedInfo and the reference transform). The <ds:Signature> goes right after
// the signed element's <saml:Issuer>, where the SAML schema wants it, and its
// Reference URI is "#<the element's ID attribute>". KeyInfo carries the
// signing certificate (X509Data).
function signAssertion(xml, key) {
  return samlify.SamlLib.constructSAMLSignature({
    rawSamlMessage: xml,
    referenceTagXPath: ASSERTION_XPATH,
    privateKey: key.keyPem,
    signingCert: key.certB64,
    signatureAlgorithm: RSA_SHA256,
    transformationAlgorithms: TRANSFORMS,
    signatureConfig: { prefix: 'ds', location: { reference: ASSERTION_ISSUER_XPATH, action: 'after' } },
    isBase64Output: false,
  });
}

function signResponse(xml, key) {
  return samlify.SamlLib.constructSAMLSignature({
    rawSamlMessage: xml,
    isMessageSigned: true,
    privateKey: key.keyPem,
    signingCert: key.certB64,
    signatureAlgorithm: RSA_SHA256,
    transformationAlgorithms: TRANSFORMS,
    signatureConfig: { prefix: 'ds', location: { reference: RESPONSE_ISSUER_XPATH, action: 'after' } },
    isBase64Output: false,
  });
}

// Slices the one <saml:Assertion>...</saml:Assertion> out of a Response
// string built (and signed) above. Safe because this file writes that XML and
// never nests assertions: returns { before, assertion, after }.
function splitAssertion(xml) {
  const start = xml.indexOf('<saml:Assertion');
  const endTag = '</saml:Assertion>';
  const end = xml.indexOf(endTag);
  if (start < 0 || end < 0 || xml.indexOf('<saml:Assertion', start + 1) >= 0) {
    throw new Error('expected exactly one saml:Assertion');
  }
  return {
    before: xml.slice(0, start),
    assertion: xml.slice(start, end + endTag.length),
    after: xml.slice(end + endTag.length),
  };
}

// Fault injection: each mode says what it changes. All but `unsigned`,
// `other_key` and `modified_after_signing` are signed correctly with the
// metadata key, so only the named defect is wrong.
const TAMPER_MODES = {
  none: 'a correct response',
  unsigned: 'no <ds:Signature> anywhere (neither assertion nor response)',
  wrong_audience: 'Audience http://someone-else/metadata, signed',
  expired: 'Conditions/SubjectConfirmationData NotOnOrAfter 10 min ago, NotBefore 20 min ago, signed',
  not_yet_valid: 'Conditions NotBefore 10 min ahead (NotOnOrAfter 15 min ahead), signed',
  wrapping: 'XSW: unsigned evil assertion (alice, platform-admins) first; the signed real one after it',
  wrapping_extensions: 'XSW: unsigned evil assertion as the only Response/Assertion; the signed real one inside samlp:Extensions',
  wrong_recipient: 'Recipient and Destination http://attacker.invalid/auth/saml/acs, signed (still POSTed to the real ACS)',
  other_key: 'signed with a key and certificate that are not in the metadata (KeyInfo carries that other certificate)',
  bad_in_response_to: 'InResponseTo (Response and SubjectConfirmationData) of a request never made, signed',
  wrong_issuer: 'Issuer (Response and Assertion) http://wrong-idp.invalid/metadata, signed with the real key',
  modified_after_signing: 'signed, then the NameID and groups are changed (digest no longer matches)',
};
let tamperMode = 'none';

const WRONG_AUDIENCE = 'http://someone-else/metadata';
const WRONG_RECIPIENT = 'http://attacker.invalid/auth/saml/acs';
const WRONG_ISSUER = 'http://wrong-idp.invalid/metadata';
const EVIL_USER = {
  username: 'alice',
  email: usersByName.get('alice')?.email || 'alice@acme.test',
  name: usersByName.get('alice')?.name || 'Alice Admin',
  groups: ['platform-admins'],
};

let lastResponseXml = null;

// Builds the XML of a Response for `user` answering `req`, applying `mode`.
function buildResponse(user, req, mode) {
  const now = Date.now();
  const min = 60 * 1000;
  const f = {
    responseId: newId(),
    assertionId: newId(),
    sessionIndex: newId(),
    issueInstant: samlTime(now),
    issuer: ENTITY_ID,
    destination: req.acsUrl,
    recipient: req.acsUrl,
    audience: req.spEntry.entityId,
    inResponseTo: req.id,
    notBefore: samlTime(now - 30 * 1000),
    notOnOrAfter: samlTime(now + 5 * min),
    scdNotOnOrAfter: samlTime(now + 5 * min),
    nameId: user.username,
    user,
    groupsAsDn: config.groups_as_dn,
  };
  let key = signing;
  let signAssertionToo = true;
  let signResponseToo = config.sign_response;

  switch (mode) {
    case 'unsigned':
      signAssertionToo = false;
      signResponseToo = false;
      break;
    case 'wrong_audience':
      f.audience = WRONG_AUDIENCE;
      break;
    case 'expired':
      f.notBefore = samlTime(now - 20 * min);
      f.notOnOrAfter = samlTime(now - 10 * min);
      f.scdNotOnOrAfter = samlTime(now - 10 * min);
      break;
    case 'not_yet_valid':
      f.notBefore = samlTime(now + 10 * min);
      f.notOnOrAfter = samlTime(now + 15 * min);
      break;
    case 'wrong_recipient':
      f.destination = WRONG_RECIPIENT;
      f.recipient = WRONG_RECIPIENT;
      break;
    case 'other_key':
      key = otherSigning;
      break;
    case 'bad_in_response_to':
      f.inResponseTo = newId();
      break;
    case 'wrong_issuer':
      f.issuer = WRONG_ISSUER;
      break;
    default:
      break;
  }

  // Signature wrapping: sign a correct response for the real user, then take
  // its signed assertion and re-home it next to an unsigned evil twin.
  if (mode === 'wrapping' || mode === 'wrapping_extensions') {
    const signedXml = signAssertion(responseXml(f, assertionXml(f)), signing);
    const { assertion: signedAssertion } = splitAssertion(signedXml);
    // Same times, audience, recipient and InResponseTo as the real one, and
    // a fresh ID (a duplicate ID would make the document invalid).
    const evilXml = assertionXml({
      ...f, assertionId: newId(), sessionIndex: newId(), nameId: EVIL_USER.username, user: EVIL_USER,
    });
    // The Response itself is never signed here: a valid Response signature
    // would vouch for the evil assertion and defeat the point.
    return mode === 'wrapping'
      ? responseXml(f, evilXml + signedAssertion)
      : responseXml(f, evilXml, signedAssertion);
  }

  let xml = responseXml(f, assertionXml(f));
  if (signAssertionToo) xml = signAssertion(xml, key);
  if (mode === 'modified_after_signing') {
    // Change the signed content without re-signing: a digest mismatch.
    const before = xml;
    xml = xml.replace(/(<saml:NameID\b[^>]*>)[^<]*(<\/saml:NameID>)/, `$1${xmlEscape(EVIL_USER.username === user.username ? 'mallory' : EVIL_USER.username)}$2`);
    xml = xml.replace(/<saml:Attribute Name="groups"[^>]*>.*?<\/saml:Attribute>/, '');
    xml = xml.replace('</saml:AttributeStatement>', `${attributeXml('groups', EVIL_USER.groups.map((g) => groupValue(g, f.groupsAsDn)))}</saml:AttributeStatement>`);
    if (xml === before) throw new Error('modified_after_signing changed nothing');
  }
  if (signResponseToo) xml = signResponse(xml, key);
  return xml;
}

// --- HTTP ------------------------------------------------------------------------------------

async function readBody(req, limit = 256 * 1024) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > limit) throw new HttpError(413, 'Too large', 'request body too large');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

async function readForm(req) {
  return new URLSearchParams(await readBody(req));
}

async function readJson(req) {
  const raw = await readBody(req);
  try {
    const value = JSON.parse(raw || '{}');
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error('not an object');
    return value;
  } catch (err) {
    throw new HttpError(400, 'Bad request', `body must be a JSON object (${err.message})`);
  }
}

function send(res, status, contentType, body, headers = {}) {
  res.writeHead(status, {
    'Content-Type': contentType,
    'Cache-Control': 'no-store',
    'Content-Length': Buffer.byteLength(body),
    ...headers,
  });
  res.end(body);
}

const sendHtml = (res, status, html) => send(res, status, 'text/html; charset=utf-8', html);
const sendJson = (res, status, value) => send(res, status, 'application/json', `${JSON.stringify(value)}\n`);
const sendText = (res, status, text) => send(res, status, 'text/plain; charset=utf-8', text);

async function handleSsoStart(res, samlRequest, relayState, binding) {
  const parsed = await parseAuthnRequest(samlRequest, binding);
  sendHtml(res, 200, loginPage({
    spEntityId: parsed.spEntry.entityId, samlRequest: parsed.samlRequest, relayState, binding,
  }));
}

async function handleLogin(req, res) {
  const form = await readForm(req);
  const binding = form.get('binding') === 'post' ? 'post' : 'redirect';
  const relayState = form.get('RelayState') ?? undefined;
  const username = (form.get('username') || '').trim();
  const password = form.get('password') || '';
  // Re-parse the request carried in the hidden fields: stateless, and the
  // same checks apply as on the way in.
  const parsed = await parseAuthnRequest(form.get('SAMLRequest'), binding);

  const user = usersByName.get(username);
  if (!user || user.password !== password) {
    sendHtml(res, 401, loginPage({
      spEntityId: parsed.spEntry.entityId,
      samlRequest: parsed.samlRequest,
      relayState,
      binding,
      username,
      error: 'Invalid username or password',
    }));
    return;
  }

  const mode = tamperMode;
  tamperMode = 'none'; // one response only
  const xml = buildResponse(user, parsed, mode);
  lastResponseXml = xml;
  sendHtml(res, 200, autoPostPage({
    acsUrl: parsed.acsUrl,
    samlResponse: Buffer.from(xml, 'utf8').toString('base64'),
    relayState,
  }));
}

async function handleTest(req, res, path) {
  if (path === '/__test/health' && req.method === 'GET') return sendText(res, 200, 'ok');
  if (path === '/__test/tamper' && req.method === 'GET') return sendJson(res, 200, { mode: tamperMode });
  if (path === '/__test/tamper' && req.method === 'POST') {
    const { mode } = await readJson(req);
    if (typeof mode !== 'string' || !Object.hasOwn(TAMPER_MODES, mode)) {
      return sendJson(res, 400, { error: `unknown mode ${JSON.stringify(mode)}`, modes: Object.keys(TAMPER_MODES) });
    }
    tamperMode = mode;
    return sendJson(res, 200, { mode, description: TAMPER_MODES[mode] });
  }
  if (path === '/__test/last' && req.method === 'GET') {
    if (lastResponseXml === null) return sendText(res, 404, 'no SAMLResponse generated yet');
    return send(res, 200, 'application/xml; charset=utf-8', lastResponseXml);
  }
  if (path === '/__test/cert' && req.method === 'GET') {
    return send(res, 200, 'application/x-pem-file', signing.certPem);
  }
  if (path === '/__test/groups' && req.method === 'POST') {
    const { username, groups } = await readJson(req);
    const user = usersByName.get(username);
    if (!user) return sendJson(res, 404, { error: `unknown user ${JSON.stringify(username)}` });
    if (!Array.isArray(groups) || !groups.every((g) => typeof g === 'string')) {
      return sendJson(res, 400, { error: 'groups must be an array of strings' });
    }
    user.groups = [...groups];
    return sendJson(res, 200, { username, groups: user.groups });
  }
  if (path === '/__test/config' && req.method === 'GET') return sendJson(res, 200, config);
  if (path === '/__test/config' && req.method === 'POST') {
    const body = await readJson(req);
    for (const k of Object.keys(config)) {
      if (body[k] === undefined) continue;
      if (typeof body[k] !== 'boolean') return sendJson(res, 400, { error: `${k} must be a boolean` });
    }
    for (const k of Object.keys(config)) if (body[k] !== undefined) config[k] = body[k];
    return sendJson(res, 200, config);
  }
  return sendText(res, 404, 'not found');
}

async function route(req, res) {
  const url = new URL(req.url, BASE_URL);
  const path = url.pathname.replace(/\/+$/, '') || '/';

  if (path.startsWith('/__test/')) return handleTest(req, res, path);

  if (path === '/metadata' && req.method === 'GET') {
    return send(res, 200, 'application/samlmetadata+xml; charset=utf-8', METADATA_XML);
  }
  if (path === '/sso' && req.method === 'GET') {
    return handleSsoStart(res, url.searchParams.get('SAMLRequest'), url.searchParams.get('RelayState') ?? undefined, 'redirect');
  }
  if (path === '/sso' && req.method === 'POST') {
    const form = await readForm(req);
    return handleSsoStart(res, form.get('SAMLRequest'), form.get('RelayState') ?? undefined, 'post');
  }
  if (path === '/sso/login' && req.method === 'POST') return handleLogin(req, res);
  if (path === '/' && req.method === 'GET') {
    return sendHtml(res, 200, page('Test SAML IdP', `<h1>Test SAML IdP</h1>
<p>Entity ID <code>${htmlEscape(ENTITY_ID)}</code></p><p><a href="/metadata">Metadata</a></p>`));
  }
  return sendText(res, 404, 'not found');
}

const server = createServer((req, res) => {
  route(req, res).catch((err) => {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (err instanceof HttpError) {
      sendHtml(res, err.status, errorPage(err.title, err.message));
      return;
    }
    console.error('saml-idp: internal error:', err);
    sendHtml(res, 500, errorPage('Internal error', String(err?.message || err)));
  });
});

server.on('error', (err) => {
  console.error(`saml-idp: cannot listen on ${HOST}:${PORT}: ${err.message}`);
  process.exit(1);
});

server.listen(PORT, HOST, () => {
  console.log(`saml-idp ready at ${BASE_URL}`);
});

let stopping = false;
function shutdown() {
  if (stopping) return;
  stopping = true;
  server.close(() => process.exit(0));
  server.closeAllConnections();
  // Never hang on shutdown.
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
