// Jobs and resource policies in a real browser, on the demo data: research borrows idle GPUs,
// a builder submits and aborts a job and reads why it waits, inference takes its reservation
// back (a live preemption) and the Policy Manager shows capacity, quotas and the preemption.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, shot, signIn, hydrated, unique } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

test('a builder submits a job, reads why it waits, aborts it, and follows a job history', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  await signIn(page, 'acme', 'bob');
  await page.waitForSelector('[data-testid=jobs-table]');
  // The demo's research jobs run; some of them borrow beyond the reservation.
  await page.waitForFunction(() => document.querySelectorAll('[data-testid=jobs-table] [data-state=running]').length >= 8,
    null, { timeout: 20000 });
  assert.match(await page.textContent('[data-testid=quota-table]'), /ml-research/);
  await hydrated(page);

  // A bad request is refused at the field.
  await page.selectOption('#job-queue', { index: 0 });
  await page.fill('#job-command', 'python train.py');
  await page.click('button:has-text("Submit job")');
  await page.waitForSelector('[data-field-error=name]');

  // A valid one is queued, and while it waits the portal says why in plain words.
  const name = unique('e2e-job');
  await page.fill('#job-name', name);
  await page.fill('#job-gpus', '4000');
  await page.click('button:has-text("Submit job")');
  await page.waitForSelector(`[data-job="${name}"]`);
  const row = page.locator(`[data-job="${name}"]`);
  await page.waitForFunction((n) => {
    const r = document.querySelector(`[data-job="${n}"] [data-testid=wait-reason]`);
    return r && /GPUs/.test(r.textContent);
  }, name, { timeout: 15000 });
  const why = await row.locator('[data-testid=wait-reason]').textContent();
  assert.match(why, /idle GPUs|reserved GPUs|limit/, why);
  await shot(page, 'portal-jobs');

  // Its page says where it stands: its place in its queue, the GPUs it waits for, its group.
  await page.click(`a:has-text("${name}")`);
  await page.waitForSelector('[data-testid=job-waiting]');
  const waiting = await page.textContent('[data-testid=job-waiting]');
  assert.match(waiting, /Place in queue\s*\d+ of \d+/, waiting);
  assert.match(waiting, /Waits for\s*4 GPUs/, waiting);
  assert.match(waiting, /Fair share to borrow/, waiting);
  await shot(page, 'job-waiting');
  await page.setViewportSize({ width: 390, height: 844 });
  await shot(page, 'job-waiting-phone');
  // Nothing is wider than the phone: wide tables scroll inside their card.
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth) <= 390, 'the page fits 390 px');
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.goto(`${BASE}/portal`);
  await page.waitForSelector(`[data-job="${name}"]`);
  await hydrated(page);

  // Abort it: the row's Abort asks first, on the job's page; it ends at once, without a
  // page reload.
  await page.evaluate(() => { window.__noReload = true; });
  await row.locator('a:has-text("Abort")').click();
  await page.waitForSelector('[data-testid=abort-confirm]');
  assert.match(await page.textContent('[data-testid=abort-confirm]'), new RegExp(`Abort ${name}\\?`));
  await page.click('button:has-text("Yes, abort it")');
  await page.waitForSelector('h1 ~ [data-state=aborted], [data-state=aborted]');
  assert.equal(await page.evaluate(() => window.__noReload), true);

  // Its page shows the history.
  await page.waitForSelector('[data-testid=events-table]');
  await page.waitForFunction(() => /aborted by bob/.test(document.querySelector('[data-testid=events-table]').textContent));
  const history = await page.textContent('[data-testid=events-table]');
  assert.match(history, /submitted/);
  assert.match(history, /aborted by bob/);
  await shot(page, 'job');
  await context.close();
});

test('inference reclaims its reservation: the Policy Manager shows borrowing, the preemption and its reason', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const page = await context.newPage();
  await signIn(page, 'acme', 'alice');
  await page.goto(`${BASE}/policy`);
  // Works before hydration: the tables are in the server's HTML.
  await page.waitForSelector('[data-testid=capacity-table]');
  const capacity = await page.textContent('[data-testid=capacity-table]');
  assert.match(capacity, /h100-shared/);
  assert.match(capacity, /acme-a100/);
  assert.match(await page.textContent('[data-testid=queues-table]'), /train/);
  await hydrated(page);
  // The chart is drawn by charming/ECharts after hydration.
  await page.waitForSelector('#capacity-chart canvas', { timeout: 15000 });

  // The demo's delayed reclaim happens about 30 s after start; the page updates by itself.
  await page.waitForSelector('[data-testid=preemptions-table]', { timeout: 90000 });
  const pre = await page.textContent('[data-testid=preemptions-table]');
  assert.match(pre, /ml-research/);
  assert.match(pre, /inference/);
  assert.match(pre, /borrowing idle GPUs/);
  const groups = await page.textContent('[data-testid=groups-table]');
  assert.match(groups, /inference/);
  await shot(page, 'policy-manager');
  // Each preemption links to its jobs: the preempted one's page tells its preemption.
  const victim = page.locator('[data-testid=preemptions-table] tbody tr').first().locator('a[title="The preempted job"]');
  const href = await victim.getAttribute('href');
  assert.match(href, /^\/portal\/jobs\/.+/);
  const jobPage = await context.newPage();
  await jobPage.goto(`${BASE}${href}`);
  await jobPage.waitForSelector('[data-testid=events-table]');
  assert.match(await jobPage.textContent('[data-testid=events-table]'), /preempt/);
  await jobPage.close();

  // Editing: a limit below the reservation is refused at the field.
  await page.selectOption('#policy-group', { label: 'data-eng' });
  await page.fill('#policy-reservation', '4000');
  await page.fill('#policy-limit', '1000');
  await page.click('button:has-text("Save policy")');
  await page.waitForSelector('[data-field-error=limit_milli]');
  await page.fill('#policy-limit', '6000');
  await page.click('button:has-text("Save policy")');
  await page.waitForSelector('[role=status] >> text=reservation 4 GPUs');
  await context.close();
});

test('the preempted job was checkpointed, requeued and says why it waits', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  await signIn(page, 'acme', 'bob');
  await page.waitForSelector('[data-testid=jobs-table]');
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid=jobs-table] tr')]
    .some(r => /resnet/.test(r.textContent) && r.children[5]?.textContent.trim() === '1'), null, { timeout: 30000 });
  const resumed = page.locator('[data-testid=jobs-table] tr', { hasText: 'resnet' }).filter({ has: page.locator('td:nth-child(6):text-is("1")') }).first();
  await resumed.locator('td:first-child a').click();
  await page.waitForSelector('[data-testid=events-table]');
  const history = await page.textContent('[data-testid=events-table]');
  assert.match(history, /preempting/);
  assert.match(history, /checkpointed/);
  assert.match(history, /requeued to resume from its checkpoint/);
  await shot(page, 'job-preempted');
  await context.close();
});

test('the jobs list searches, filters and pages: an admin over the tenant, a member over their own', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  await signIn(page, 'acme', 'alice');
  await page.click('nav >> text=Jobs');
  await page.waitForSelector('[data-testid=all-jobs-table]');
  // The admin sees other users' jobs.
  const users = await page.locator('[data-testid=all-jobs-table] tbody td:nth-child(3)').allTextContents();
  assert.ok(users.some(u => u !== 'alice'), users.join(','));
  // Filter by state with the plain GET form: every row shown is running.
  await page.selectOption('#f-state', 'running');
  await Promise.all([page.waitForURL(/state=running/), page.click('button:has-text("Filter")')]);
  await page.waitForSelector('[data-testid=all-jobs-table]');
  const states = await page.locator('[data-testid=all-jobs-table] [data-state]').evaluateAll(els => els.map(e => e.dataset.state));
  assert.ok(states.length > 0 && states.every(s => s === 'running'), states.join(','));
  // A name search that matches nothing says so.
  await page.goto(`${BASE}/jobs?q=${encodeURIComponent('no such job %_')}`);
  await page.waitForSelector('[data-testid=no-jobs]');
  // Pages (10 here): the next page has other jobs than the first.
  await page.goto(`${BASE}/jobs?limit=10`);
  await page.waitForSelector('[data-testid=all-jobs-table]');
  const first = await page.locator('[data-testid=all-jobs-table] tbody tr').evaluateAll(rs => rs.map(r => r.dataset.job));
  assert.equal(first.length, 10);
  await page.click('[data-testid=older-jobs]');
  await page.waitForURL(/cursor=/);
  await page.waitForSelector('[data-testid=all-jobs-table]');
  const second = await page.locator('[data-testid=all-jobs-table] tbody tr').evaluateAll(rs => rs.map(r => r.dataset.job));
  assert.ok(second.length > 0 && second.every(n => !first.includes(n)), 'another page');
  await shot(page, 'jobs');
  await page.setViewportSize({ width: 390, height: 844 });
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth) <= 390, 'the jobs page fits 390 px');
  await shot(page, 'jobs-phone');
  await context.close();

  // A member sees only their own jobs.
  const member = await browser.newContext();
  const mpage = await member.newPage();
  await signIn(mpage, 'acme', 'bob');
  await mpage.goto(`${BASE}/jobs`);
  await mpage.waitForSelector('[data-testid=all-jobs-table]');
  const own = await mpage.locator('[data-testid=all-jobs-table] tbody td:nth-child(3)').allTextContents();
  assert.ok(own.length > 0 && own.every(u => u === 'bob'), own.join(','));
  await member.close();
});

test('a queue\'s waiting count opens its waiting order, place by place, page after page (the integration suite checks each place against the job\'s own)', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  await signIn(page, 'acme', 'alice');
  await page.goto(`${BASE}/policy`);
  await page.waitForSelector('[data-testid=queues-table]');
  // The queue with the most waiting jobs (the demo's data-eng waits at its limit).
  const links = page.locator('[data-testid=queues-table] a[href*="sort=queue"]');
  const counts = await links.allTextContents();
  const most = counts.map(Number).reduce((best, n, i, all) => (n > all[best] ? i : best), 0);
  const waiting = Number(counts[most]);
  assert.ok(waiting >= 2, `a queue with jobs waiting: ${counts}`);
  const href = await links.nth(most).getAttribute('href');
  await page.goto(`${BASE}${href}&limit=1`);
  await page.waitForSelector('[data-testid=queue-order]');
  assert.deepEqual(await page.locator('[data-testid=place]').allTextContents(), ['1']);
  assert.ok((await page.locator('[data-testid=all-jobs-table] td[data-state]').allTextContents()).every((s) => /queued|preempted/.test(s)));
  const firstJob = await page.locator('[data-testid=all-jobs-table] tbody tr').first().getAttribute('data-job');
  await page.click('[data-testid=older-jobs]');
  await page.waitForURL(/from=1/);
  await page.waitForSelector('[data-testid=place]');
  assert.deepEqual(await page.locator('[data-testid=place]').allTextContents(), ['2']);
  assert.notEqual(await page.locator('[data-testid=all-jobs-table] tbody tr').first().getAttribute('data-job'), firstJob);
  await page.goto(`${BASE}${href}`);
  await page.waitForSelector('[data-testid=queue-order]');
  // Each place has its estimated start: a time (the demo's pools are simulated, so the running
  // jobs' ends are known) that never comes earlier for a job further down the line.
  const starts = await page.locator('[data-testid=estimated-start]').allTextContents();
  assert.equal(starts.length, await page.locator('[data-testid=place]').count());
  assert.match(starts[0].trim(), /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$/, starts.join(' | '));
  const times = starts.map((t) => t.trim()).filter((t) => t !== '—');
  assert.deepEqual([...times].sort(), times, 'estimates do not go back in time down the line');
  assert.ok(starts.findIndex((t) => t.trim() === '—') === -1 || starts.slice(starts.findIndex((t) => t.trim() === '—')).every((t) => t.trim() === '—'), 'once unknown, unknown for those behind');
  await shot(page, 'queue-order');
  await context.close();
});
