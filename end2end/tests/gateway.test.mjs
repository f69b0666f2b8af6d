// The gateway's pages. A tenant admin creates a gateway, an endpoint whose instance is a small
// HTTP server of this test, and a route /v1 to it; a member whose group a rule gives `use` on
// the endpoint issues a token, sees its secret once with a curl command and an OpenAI client
// to paste, calls the gateway with it and gets the upstream's answer; a switch of the route
// keeps the URL; the revoked token is refused (401). A raw TCP route is opened with its form (a
// network that is not one said at its field) and closed after a confirmation. A bad address is said at its field (with
// and without JavaScript); an endpoint's page shows its instances and counters, and its traffic
// over time (charts, tables of the same numbers, per instance) once sampled; the gateways
// page is refused to a member, an endpoint the member may not see answers 404. An endpoint
// deployed with a serving job in one action lists the job on its page; a refused job (port 80)
// is said at its field and leaves no endpoint.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import https from 'node:https';
import { BASE, PASSWORD, launch, shot, signIn, hydrated, unique, scrollTo } from './helpers.mjs';

let browser;
let upstream;
let upstreamPort;
before(async () => {
  browser = await launch();
  // The endpoint's instance: answers every request with JSON saying what it got.
  upstream = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ upstream: 'e2e', method: req.method, path: req.url, body }));
    });
  });
  await new Promise((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  upstreamPort = upstream.address().port;
});
after(async () => {
  await browser?.close();
  upstream?.close();
});

async function fits(page, what) {
  const width = page.viewportSize().width;
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth) <= width, `${what}: the page fits ${width} px`);
}

/// Full-page screenshots at 1440 and 390 px, each page fitting its width.
async function shots(page, name) {
  await shot(page, name);
  await page.setViewportSize({ width: 390, height: 844 });
  await fits(page, name);
  await shot(page, `${name}-phone`);
  await page.setViewportSize({ width: 1440, height: 1000 });
}

/// A chat completion through the gateway: { status, headers, text }. With TLS, the gateway's
/// certificate is the self-signed one a gateway without its own gets.
function post(url, token) {
  const target = new URL(`${url}/chat/completions`);
  const body = JSON.stringify({ model: 'llama', messages: [{ role: 'user', content: 'hi' }] });
  const client = target.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.request(target, {
      method: 'POST',
      agent: false,
      rejectUnauthorized: false,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { text += c; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/// The same, while the listener may still be starting.
async function call(url, token) {
  for (let i = 0; ; i++) {
    try {
      return await post(url, token);
    } catch (e) {
      if (i >= 40) throw e;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

/// Calls until the gateway answers `want` (a commit reaches the gateway before its next
/// request; this only waits for the page's form to have been sent).
async function answers(url, token, want) {
  let last;
  for (let i = 0; i < 40; i++) {
    last = await call(url, token);
    if (last.status === want) return last;
    await new Promise((r) => setTimeout(r, 250));
  }
  assert.fail(`${url} answered ${last?.status}, not ${want}`);
}

const row = (page, table, text) => page.locator(`[data-testid=${table}] tbody tr`, { hasText: text }).first();

test('an admin publishes an endpoint; a member calls it with a token shown once, then revokes it', async () => {
  const admin = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const page = await admin.newPage();
  await signIn(page, 'acme', 'alice');
  assert.equal(await page.locator('nav a:has-text("Gateways")').count(), 1);

  // The gateway prod (one left by an earlier run goes first, confirmed).
  await page.goto(`${BASE}/gateways`);
  await hydrated(page);
  if (await page.locator('[data-testid=gateways-table] tr[data-gateway=prod]').count()) {
    await page.click('a[aria-label="Delete gateway prod"]');
    await page.click('button:has-text("Delete gateway prod")');
    await page.waitForSelector('text=Gateway deleted: its listener stopped.');
  }
  await page.fill('#gateway-name', 'Prod');
  await page.click('button:has-text("Create gateway")');
  await page.waitForSelector('[data-field-error=name]');
  await page.fill('#gateway-name', 'prod');
  await page.click('button:has-text("Create gateway")');
  await page.waitForSelector('[data-testid=gateways-table] tr[data-gateway=prod]');
  const gatewayUrl = await page.textContent('tr[data-gateway=prod] [data-testid=gateway-url]');
  assert.match(gatewayUrl, /^https?:\/\/127\.0\.0\.1:\d+$/);
  // A second one of the same name is refused at the field.
  await page.fill('#gateway-name', 'prod');
  await page.click('button:has-text("Create gateway")');
  await page.waitForSelector('[data-field-error=name] >> text=already exists');

  // An endpoint: a bad address is said at its field; then with the test's server.
  const name = unique('llama');
  await page.goto(`${BASE}/endpoints`);
  await hydrated(page);
  await page.selectOption('#endpoint-project', { label: 'llm-finetune' });
  await page.fill('#endpoint-name', name);
  await page.fill('#endpoint-targets', `http://10.0.0.7:8000\n127.0.0.1:${upstreamPort}`);
  await page.click('button:has-text("Create endpoint")');
  await page.waitForSelector('[data-field-error=targets]');
  assert.match(await page.textContent('[data-field-error=targets]'), /"http:\/\/10\.0\.0\.7:8000" must be host:port/);
  await page.fill('#endpoint-name', name);
  await page.fill('#endpoint-targets', `127.0.0.1:${upstreamPort}`);
  await page.click('button:has-text("Create endpoint")');
  await page.waitForSelector(`[data-testid=endpoints-table] tr[data-endpoint="${name}"]`);
  assert.match(await row(page, 'endpoints-table', name).textContent(), /llm-finetune.*not published yet.*1 of 1 up.*admin/);
  const endpointPath = await row(page, 'endpoints-table', name).locator('a').getAttribute('href');
  // One bob may not see: in vision, where no rule of his reaches.
  const hidden = unique('hidden');
  await page.selectOption('#endpoint-project', { label: 'vision' });
  await page.fill('#endpoint-name', hidden);
  await page.fill('#endpoint-targets', '');
  await page.click('button:has-text("Create endpoint")');
  await page.waitForSelector(`[data-testid=endpoints-table] tr[data-endpoint="${hidden}"]`);
  const hiddenPath = await row(page, 'endpoints-table', hidden).locator('a').getAttribute('href');

  // The route /v1 on prod.
  await page.goto(`${BASE}/gateways`);
  await hydrated(page);
  await page.selectOption('#route-gateway', { label: 'prod' });
  await page.fill('#route-prefix', 'v1');
  await page.selectOption('#route-endpoint', { label: name });
  await page.click('button:has-text("Create route")');
  await page.waitForSelector('[data-field-error=path_prefix]');
  await page.fill('#route-prefix', '/v1');
  await page.click('button:has-text("Create route")');
  const url = `${gatewayUrl}/v1`;
  await page.waitForSelector(`[data-testid=routes-table] tr[data-route="${url}"]`);
  // A raw TCP route for it, opened with the page's form: a network that is not one is said
  // at its field; then listed with its port and networks. The certificate each gateway
  // presents is named.
  await page.selectOption('#tcp-gateway', { label: 'prod' });
  await page.selectOption('#tcp-endpoint', { label: name });
  await page.fill('#tcp-sources', '10.0.0.0/33');
  await page.click('button:has-text("Open TCP route")');
  await page.waitForSelector('[data-field-error=allowed_sources]');
  await page.fill('#tcp-sources', '10.0.0.0/8\n192.168.0.0/16');
  await page.click('button:has-text("Open TCP route")');
  const opened = await page.waitForSelector('text=/TCP route open at \\S+:\\d+\\./');
  const address = (await opened.textContent()).match(/open at (\S+:\d+)\./)[1];
  await page.waitForSelector(`[data-testid=tcp-routes-table] tr[data-tcp-route="${address}"]`);
  const tcpRow = await row(page, 'tcp-routes-table', address).textContent();
  assert.match(tcpRow, new RegExp(`prod.*${name}.*plain.*10\\.0\\.0\\.0/8, 192\\.168\\.0\\.0/16`));
  assert.match(await page.textContent('tr[data-gateway=prod] [data-testid=gateway-certificate]'), /self-signed · PEM|none \(plain HTTP\)/);
  await shots(page, 'gateways');
  // Closed after a confirmation: gone from the table.
  await row(page, 'tcp-routes-table', address).locator('a:has-text("Close")').click();
  await page.click(`button:has-text("Delete TCP route ${address}")`);
  await page.waitForSelector('text=TCP route closed: its port no longer accepts.');
  // Out of view as the message shows (it once stayed until the page's data was read again),
  // then out of the page.
  assert.equal(await page.locator(`tr[data-tcp-route="${address}"]`).isVisible(), false, 'the closed route is out of view with the message');
  await page.waitForSelector(`tr[data-tcp-route="${address}"]`, { state: 'detached', timeout: 5000 });
  assert.equal(await page.locator(`tr[data-tcp-route="${address}"]`).count(), 0);

  // ml-research (bob's group) gets use on the endpoints of llm-finetune.
  await page.goto(`${BASE}/settings`);
  await page.click('[data-testid=groups-table] a:has-text("ml-research")');
  await page.waitForSelector('#rule-scope');
  await hydrated(page);
  await page.selectOption('#rule-permission', 'use');
  await page.selectOption('#rule-kind', 'endpoint');
  await page.selectOption('#rule-scope', { label: 'in llm-finetune' });
  await page.click('button:has-text("Add rule")');
  await page.waitForSelector('[data-testid=rules-table] >> text=endpoints in project llm-finetune and below');

  // bob sees the endpoint and its URL, issues a token for it alone.
  const member = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const bob = await member.newPage();
  await signIn(bob, 'acme', 'bob');
  assert.equal(await bob.locator('nav a:has-text("Gateways")').count(), 0);
  await bob.goto(`${BASE}/endpoints`);
  await hydrated(bob);
  assert.match(await row(bob, 'endpoints-table', name).textContent(), new RegExp(`${url}.*1 of 1 up.*use`));
  assert.equal(await bob.locator(`tr[data-endpoint="${hidden}"]`).count(), 0);
  assert.match(await bob.textContent('body'), /You may create endpoints in no project yet/);
  await bob.selectOption('#token-gateway', { label: `prod (${gatewayUrl})` });
  await bob.fill('#token-name', 'laptop');
  await bob.selectOption('#token-endpoint', { label: name });
  await bob.fill('#token-days', '400');
  await bob.click('button:has-text("Issue token")');
  await bob.waitForSelector('[data-field-error=expires_in_days]');
  await bob.fill('#token-name', 'laptop');
  await bob.selectOption('#token-endpoint', { label: name });
  await bob.fill('#token-days', '30');
  await bob.click('button:has-text("Issue token")');
  await bob.waitForSelector('[data-testid=token-secret]');
  const secret = (await bob.textContent('[data-testid=token-secret]')).trim();
  assert.match(secret, /^syg_\S{20,}$/);
  // Over TLS with the gateway's self-signed certificate, the examples trust its PEM, offered
  // for download beside them.
  const selfSigned = url.startsWith('https://');
  const trust = selfSigned ? ' --cacert prod.pem' : '';
  const curl = await bob.textContent('[data-testid=token-curl]');
  assert.ok(curl.startsWith(`curl${trust} ${url}/chat/completions \\`), curl);
  assert.ok(curl.includes(`Authorization: Bearer ${secret}`), curl);
  assert.ok(curl.includes(`"model": "${name}"`), curl);
  const python = await bob.textContent('[data-testid=token-python]');
  const verify = selfSigned ? ', http_client=httpx.Client(verify="prod.pem")' : '';
  assert.ok(python.includes(`client = OpenAI(base_url="${url}", api_key="${secret}"${verify})`), python);
  if (selfSigned) {
    const pem = await bob.locator('[data-testid=token-cacert] a').getAttribute('href');
    const got = await bob.request.get(`${BASE}${pem}`);
    assert.equal(got.status(), 200);
    assert.match(await got.text(), /^-----BEGIN CERTIFICATE-----/);
  }
  await bob.waitForSelector('[data-testid=tokens-table] tr[data-token=laptop]');
  assert.match(await row(bob, 'tokens-table', 'laptop').textContent(), new RegExp(`prod.*endpoint: ${name}.*${secret.slice(0, 12)}….*active`));
  await scrollTo(bob, '[data-testid=issued-token]');
  await shots(bob, 'endpoints-token-issued');

  // The token calls the endpoint through the gateway: the upstream answers.
  let r = await call(url, secret);
  assert.equal(r.status, 200);
  const answer = JSON.parse(r.text);
  assert.equal(answer.upstream, 'e2e');
  assert.equal(answer.path, '/v1/chat/completions');
  assert.match(answer.body, /"content":"hi"/);

  // The route switched to the other endpoint keeps its URL; bob's token does not reach it.
  await page.goto(`${BASE}/gateways`);
  await hydrated(page);
  const routeRow = page.locator(`[data-testid=routes-table] tr[data-route="${url}"]`);
  await routeRow.locator('select').selectOption({ label: hidden });
  await routeRow.locator('button:has-text("Switch")').click();
  await routeRow.locator('[role=status] >> text=Switched.').waitFor();
  assert.equal((await call(url, secret)).status, 403);
  await routeRow.locator('select').selectOption({ label: name });
  await routeRow.locator('button:has-text("Switch")').click();
  await answers(url, secret, 200);

  // The secret was shown once: not after a reload.
  await bob.reload();
  await hydrated(bob);
  assert.equal(await bob.locator('[data-testid=token-secret]').count(), 0);
  assert.ok(!(await bob.textContent('body')).includes(secret));

  // The endpoint's page: its instance served, its counters counted; bob may not change it.
  await bob.goto(`${BASE}${endpointPath}`);
  await hydrated(bob);
  assert.equal(await bob.textContent('[data-testid=endpoint-name]'), name);
  // Address, health, ejected, requests, failures, in flight.
  const cells = await bob.locator(`[data-testid=instances-table] tr[data-instance="127.0.0.1:${upstreamPort}"] td`).allTextContents();
  assert.deepEqual(cells.slice(1, 3), ['up', 'no'], cells.join(' | '));
  assert.ok(Number(cells[3]) >= 2 && cells[4] === '0' && cells[5] === '0', cells.join(' | '));
  const ok = await bob.locator('[data-testid=status-table] tr', { hasText: '2xx' }).locator('td').nth(1).textContent();
  assert.ok(Number(ok) >= 2, `2xx: ${ok}`);
  assert.ok(Number(await bob.textContent('[data-testid=requests-total]')) >= Number(ok));
  assert.doesNotMatch(await bob.textContent('[data-testid=latency-table]'), /—/);
  assert.match(await bob.textContent('[data-testid=routes-table]'), new RegExp(`prod\\s*${url}`));
  assert.equal(await bob.locator('#target-address').count(), 0);
  // Its traffic over time: once the gateway's next sample (every 10 s) has bob's requests, a
  // row per minute with them, beside the charts; the instance with its requests and health.
  const requestsRow = bob.locator('[data-testid=traffic-requests-table] tbody tr').first();
  await requestsRow.waitFor({ timeout: 30000 });
  let traffic = await requestsRow.locator('td').allTextContents();
  // Time, requests, then per minute 2xx, 4xx, 5xx, 1xx/3xx.
  assert.match(traffic[0], /^\d\d:\d\d$/, traffic.join(' | '));
  assert.ok(traffic.slice(1).some((v) => Number(v) > 0), traffic.join(' | '));
  const ok2xx = await bob.locator('[data-testid=traffic-requests-table] tbody tr td:nth-child(3)').allTextContents();
  assert.ok(ok2xx.some((v) => Number(v) >= 1), `2xx per minute: ${ok2xx.join(' | ')}`);
  // Time, requests, 5xx, error rate.
  const errors = await bob.locator('[data-testid=traffic-errors-table] tbody tr').first().locator('td').allTextContents();
  assert.ok(Number(errors[1]) >= 1 && errors[3] === '0 %', errors.join(' | '));
  const latency = await bob.locator('[data-testid=traffic-latency-table] tbody tr').first().locator('td').allTextContents();
  assert.ok(latency.slice(1).every((v) => /^[\d.]+ m?s$/.test(v)), `p50, p95, p99: ${latency.join(' | ')}`);
  const instance = await bob.locator(`[data-testid=traffic-instances-table] tr[data-instance="127.0.0.1:${upstreamPort}"] td`).allTextContents();
  assert.equal(instance[1], 'healthy', instance.join(' | '));
  assert.ok(Number(instance[2]) >= 1 && instance[3] === '0', instance.join(' | '));
  await bob.waitForSelector('#traffic-requests-chart canvas');
  await bob.waitForSelector('#traffic-latency-chart canvas');
  await scrollTo(bob, '[data-testid=traffic]');
  await shots(bob, 'endpoint-traffic');
  // The last 15 minutes: a row per 10-second sample.
  await bob.click('a:has-text("Last 15 minutes")');
  await bob.waitForURL(/window=15m/);
  await bob.waitForFunction(() => /^\d\d:\d\d:\d\d$/.test(document.querySelector('[data-testid=traffic-requests-table] tbody tr td')?.textContent ?? ''));
  traffic = await requestsRow.locator('td').allTextContents();
  assert.ok(traffic.slice(1).some((v) => Number(v) > 0), traffic.join(' | '));
  await bob.waitForSelector('#traffic-requests-chart canvas');
  // An endpoint bob may not see answers 404, as one that does not exist.
  assert.equal((await bob.goto(`${BASE}${hiddenPath}`)).status(), 404);
  await bob.waitForSelector('text=Endpoint not found');
  assert.equal((await bob.goto(`${BASE}/endpoints/no-such-endpoint`)).status(), 404);
  // The gateways page is refused to him.
  assert.equal((await bob.goto(`${BASE}/gateways`)).status(), 403);
  await bob.waitForSelector('[data-testid=forbidden]');

  // Revoked, the token is refused from the next request on.
  await bob.goto(`${BASE}/endpoints`);
  await hydrated(bob);
  await bob.click('a[aria-label="Revoke token laptop"]');
  await bob.click('button:has-text("Revoke token laptop")');
  await bob.waitForSelector('text=Revoked: the gateway refuses the token from its next request.');
  await bob.waitForFunction(() => document.querySelector('[data-testid=tokens-table] tr[data-token=laptop] [data-testid=token-state]')?.textContent === 'revoked');
  r = await call(url, secret);
  assert.equal(r.status, 401);
  assert.match(r.headers['content-type'], /application\/problem\+json/);
  await member.close();

  // alice manages the endpoint: an instance added (a bad address first), then removed.
  await page.goto(`${BASE}${endpointPath}`);
  await hydrated(page);
  await page.fill('#target-address', 'not an address');
  await page.click('button:has-text("Add instance")');
  await page.waitForSelector('[data-field-error=address] >> text=must be host:port');
  await page.fill('#target-address', '127.0.0.1:9');
  await page.click('button:has-text("Add instance")');
  await page.waitForSelector('[data-testid=instances-table] tr[data-instance="127.0.0.1:9"]');
  // Nothing listens there: the next probe marks it down.
  await page.waitForFunction(() => document.querySelector('[data-testid=instances-table] tr[data-instance="127.0.0.1:9"] [data-testid=instance-health]')?.textContent === 'down', null, { timeout: 15000 });
  await shots(page, 'endpoint');
  await page.click('a[aria-label="Remove instance 127.0.0.1:9"]');
  await page.click('button:has-text("Delete instance 127.0.0.1:9")');
  await page.waitForSelector('text=Instance removed: no new request goes to it.');
  // Scoped to the instances table: the traffic section below keeps the instance in its
  // history when a sample was taken while it was registered.
  await page.waitForFunction(() => !document.querySelector('[data-testid=instances-table] tr[data-instance="127.0.0.1:9"]'));
  // Another instance's confirmation, opened after that removal, keeps its row in view (the
  // row being confirmed was once hidden as if removed); confirmed, it goes.
  await page.fill('#target-address', '127.0.0.1:10');
  await page.click('button:has-text("Add instance")');
  await page.waitForSelector('[data-testid=instances-table] tr[data-instance="127.0.0.1:10"]');
  await page.click('a[aria-label="Remove instance 127.0.0.1:10"]');
  await page.waitForSelector('button:has-text("Delete instance 127.0.0.1:10")');
  assert.ok(await page.locator('[data-testid=instances-table] tr[data-instance="127.0.0.1:10"]').isVisible(), 'the instance being confirmed stays in view');
  await page.click('button:has-text("Delete instance 127.0.0.1:10")');
  await page.waitForFunction(() => !document.querySelector('[data-testid=instances-table] tr[data-instance="127.0.0.1:10"]'));
  await page.goto(`${BASE}/endpoints`);
  await hydrated(page);
  await shots(page, 'endpoints');

  // A scratch gateway goes, confirmed.
  await page.goto(`${BASE}/gateways`);
  await hydrated(page);
  const scratch = unique('dev');
  await page.fill('#gateway-name', scratch);
  await page.click('button:has-text("Create gateway")');
  await page.waitForSelector(`tr[data-gateway="${scratch}"]`);
  await page.click(`a[aria-label="Delete gateway ${scratch}"]`);
  await page.click(`button:has-text("Delete gateway ${scratch}")`);
  await page.waitForSelector('text=Gateway deleted: its listener stopped.');
  assert.equal(await page.locator(`tr[data-gateway="${scratch}"]`).isVisible(), false, 'the deleted gateway is out of view with the message');
  await page.waitForSelector(`tr[data-gateway="${scratch}"]`, { state: 'detached', timeout: 5000 });
  assert.equal(await page.locator(`tr[data-gateway="${scratch}"]`).count(), 0);

  // Leave ml-research as the demo had it.
  await page.goto(`${BASE}/settings`);
  await page.click('[data-testid=groups-table] a:has-text("ml-research")');
  await page.waitForSelector('[data-testid=rules-table]');
  await hydrated(page);
  await page.click('[data-testid=rules-table] a[aria-label="Delete the rule use on endpoints in project llm-finetune and below"]');
  await page.click('button:has-text("Delete the rule use")');
  await page.waitForSelector('text=Rule deleted.');
  await admin.close();
});

test('alice deploys an endpoint with a serving job in one action; a refused job leaves no endpoint', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const page = await context.newPage();
  await signIn(page, 'acme', 'alice');
  await page.goto(`${BASE}/endpoints`);
  await hydrated(page);
  const deploy = async (name, port) => {
    await page.selectOption('#endpoint-project', { label: 'llm-finetune' });
    await page.fill('#endpoint-name', name);
    if (!(await page.locator('#deploy-command').isVisible())) await page.click('[data-testid=deploy] summary');
    await page.selectOption('#deploy-queue', { index: 0 });
    await page.fill('#deploy-command', 'vllm serve meta-llama/Llama-3.1-8B --port $PORT');
    if (port !== undefined) await page.fill('#deploy-port', port);
  };

  // Port 80: the submit refuses it at the port field, and the endpoint made first goes again.
  const refused = unique('badport');
  await deploy(refused, '80');
  assert.equal(await page.inputValue('#endpoint-targets'), '');
  await scrollTo(page, '[data-testid=deploy]');
  await shots(page, 'endpoints-deploy-form');
  // The page is read again after the answer: the error stays in sight.
  const reread = page.waitForResponse((r) => r.url().includes('/_sf/endpoints/overview'));
  await page.click('button:has-text("Create endpoint")');
  await page.waitForSelector('[data-field-error=port]');
  await reread;
  await page.waitForSelector('[data-field-error=port]', { state: 'visible' });
  assert.match(await page.textContent('[data-field-error=port]'), /must be between 1024 and 65535/);
  assert.equal(await page.inputValue('#deploy-port'), '80');
  await scrollTo(page, '[data-field-error=port]');
  await shots(page, 'endpoints-deploy-refused');
  await page.reload();
  await hydrated(page);
  assert.equal(await page.locator(`tr[data-endpoint="${refused}"]`).count(), 0);
  assert.doesNotMatch(await page.textContent('body'), new RegExp(refused));

  // Deployed on a queue of the demo with the default port: the endpoint is listed (the
  // simulated pool's job serves nothing, so no instance is up) and its page lists the job.
  const name = unique('served');
  await deploy(name);
  assert.equal(await page.inputValue('#deploy-port'), '8000');
  await page.click('button:has-text("Create endpoint")');
  await page.waitForSelector(`[data-testid=endpoints-table] tr[data-endpoint="${name}"]`);
  await page.waitForSelector(`[role=status] >> text=serving job ${name} submitted`);
  assert.match(await row(page, 'endpoints-table', name).textContent(), /llm-finetune.*not published yet.*none registered/);
  const jobHref = await page.locator('[role=status] a', { hasText: name }).last().getAttribute('href');
  assert.match(jobHref, /^\/portal\/jobs\/\S+$/);
  await page.goto(`${BASE}${await row(page, 'endpoints-table', name).locator('a').getAttribute('href')}`);
  await hydrated(page);
  const job = page.locator('[data-testid=serving-jobs-table] tbody tr').first();
  await job.waitFor();
  assert.equal(await job.locator('a').textContent(), name);
  assert.equal(await job.locator('a').getAttribute('href'), jobHref);
  assert.match(await job.locator('[data-testid=serving-job-state]').textContent(), /^(queued|admitted|starting|running|succeeded)$/);
  // Nothing called it yet: its traffic says so.
  assert.match(await page.textContent('[data-testid=traffic-empty]'), /No requests in the last hour yet/);
  await shots(page, 'endpoint-serving-jobs');
  // The link opens the job's page.
  await job.locator('a').click();
  await page.waitForURL(`${BASE}${jobHref}`);
  await context.close();
});

test('without JavaScript: a new endpoint with a bad address is refused at its field and keeps what was typed', async () => {
  const context = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 1440, height: 1000 } });
  const page = await context.newPage();
  const submit = (button) => Promise.all([page.waitForNavigation(), page.click(button)]);
  await signIn(page, 'acme', 'alice');
  await page.goto(`${BASE}/endpoints`);
  const name = unique('nojs');
  await page.selectOption('#endpoint-project', { label: 'llm-finetune' });
  await page.fill('#endpoint-name', name);
  await page.fill('#endpoint-targets', 'vllm-0:8000\nvllm-1:port');
  await submit('button:has-text("Create endpoint")');
  await page.waitForSelector('[data-field-error=targets]');
  assert.match(await page.textContent('[data-field-error=targets]'), /"vllm-1:port" must be host:port/);
  assert.equal(await page.inputValue('#endpoint-name'), name);
  assert.equal(await page.inputValue('#endpoint-targets'), 'vllm-0:8000\nvllm-1:port');
  assert.equal(await page.locator('#endpoint-project option:checked').textContent(), 'llm-finetune');
  await scrollTo(page, '[data-field-error=targets]');
  await shot(page, 'endpoints-rejected-nojs');
  await page.fill('#endpoint-targets', 'vllm-0:8000');
  await submit('button:has-text("Create endpoint")');
  await page.waitForSelector(`[data-testid=endpoints-table] tr[data-endpoint="${name}"]`);
  await page.waitForSelector('[role=status] >> text=Endpoint created.');
  // Its page works too, and its instance goes in two steps.
  await page.goto(`${BASE}${await row(page, 'endpoints-table', name).locator('a').getAttribute('href')}`);
  await page.waitForSelector('[data-testid=instances-table] tr[data-instance="vllm-0:8000"]');
  // Its traffic section is rendered by the server (nothing called it yet).
  await page.waitForSelector('[data-testid=traffic-empty]');
  await submit('a[aria-label="Remove instance vllm-0:8000"]');
  await submit('button:has-text("Delete instance vllm-0:8000")');
  await page.waitForSelector('text=No instances registered');
  await context.close();
});
