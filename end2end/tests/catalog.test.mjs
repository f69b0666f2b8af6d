// The catalog: projects as a tree, models and datasets registered in them, who may use each
// (the groups whose rules reach it), deletes after a confirmation, a project in use refused
// with the reason, a member's narrower view, and a rejected registration without JavaScript
// that keeps what was typed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, launch, shot, signIn, hydrated, unique, scrollTo, slowed } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

async function fits(page, what) {
  const width = page.viewportSize().width;
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth) <= width, `${what}: the page fits ${width} px`);
}

const modelRow = (page, name) => page.locator('[data-testid=models-table] tbody tr', { hasText: name }).first();

test('projects form a tree; a model registered in one is used by the groups a rule names, then deleted', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const page = await context.newPage();
  await signIn(page, 'acme', 'alice');
  await page.goto(`${BASE}/catalog`);
  await page.waitForSelector('[data-testid=project-tree]');
  await hydrated(page);
  // The demo's tree: vision-detection sits under vision.
  const items = await page.locator('[data-testid=project-tree] li').evaluateAll((lis) =>
    lis.map((li) => [li.querySelector('span').textContent.replace('└ ', ''), parseFloat(li.style.paddingLeft || '0')]));
  const at = (n) => items.find(([name]) => name === n);
  assert.ok(at('vision') && at('vision-detection') && at('llm-finetune'), JSON.stringify(items));
  assert.ok(at('vision-detection')[1] > at('vision')[1], 'vision-detection is indented under vision');
  assert.ok(items.indexOf(at('vision-detection')) === items.indexOf(at('vision')) + 1, 'and follows it');

  // The demo's catalog: research may use the models of llm-finetune, inference those of
  // vision-detection.
  assert.match(await modelRow(page, 'llama-3.1-8b-instruct').textContent(), /llm-finetune.*hf:\/\/meta-llama.*ml-research \(use\)/);
  assert.match(await modelRow(page, 'yolov8-detector').textContent(), /inference \(use\)/);

  // A project of our own under vision, and a model in it.
  const project = unique('e2e-proj');
  await page.fill('#project-name', project);
  await page.selectOption('#project-parent', { label: 'vision' });
  await page.click('button:has-text("Add project")');
  await page.waitForSelector(`[data-testid=project-tree] >> text=${project}`);
  // Its form holds its values; a description is added.
  await page.click(`[data-testid=project-tree] a[aria-label="Edit project ${project}"]`);
  await page.waitForSelector('[data-testid=edit-project]');
  assert.equal(await page.inputValue('#edit-project-name'), project);
  assert.equal(await page.inputValue('#edit-project-description'), '');
  await page.fill('#edit-project-description', 'detection experiments');
  await page.click('button:has-text("Save project")');
  await page.waitForSelector('[data-testid=edit-project] [role=status] >> text=Saved.');
  await page.waitForSelector('[data-testid=project-tree] >> text=detection experiments');
  const model = unique('e2e-model');
  await page.fill('#model-name', model);
  await page.selectOption('#model-project', { label: `\u00a0\u00a0${project}` });
  await page.fill('#model-location', 'hf://acme/e2e-model');
  await page.click('button:has-text("Register model")');
  await page.waitForSelector(`[data-testid=models-table] >> text=${model}`);
  assert.match(await modelRow(page, model).textContent(), /tenant admins only/);

  // ml-research gets use on models in the vision subtree: the model's row names it.
  await page.goto(`${BASE}/settings`);
  await page.click('[data-testid=groups-table] a:has-text("ml-research")');
  await page.waitForSelector('#rule-scope');
  await hydrated(page);
  await page.selectOption('#rule-permission', 'use');
  await page.selectOption('#rule-kind', 'model');
  await page.selectOption('#rule-scope', { label: 'in vision' });
  await page.click('button:has-text("Add rule")');
  await page.waitForSelector('[data-testid=rules-table] >> text=models in project vision and below');
  await page.goto(`${BASE}/catalog`);
  await page.waitForSelector(`[data-testid=models-table] >> text=${model}`);
  assert.match(await modelRow(page, model).textContent(), /ml-research \(use\)/);
  await shot(page, 'catalog');
  await page.setViewportSize({ width: 390, height: 844 });
  await fits(page, 'the catalog');
  await shot(page, 'catalog-phone');
  await page.setViewportSize({ width: 1440, height: 1000 });

  // bob, in ml-research, sees the model with use, and none of the admin's controls.
  const member = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const bob = await member.newPage();
  await signIn(bob, 'acme', 'bob');
  await bob.goto(`${BASE}/catalog`);
  await bob.waitForSelector(`[data-testid=models-table] >> text=${model}`);
  const seen = await bob.locator('[data-testid=models-table] tbody tr', { hasText: model }).first().textContent();
  assert.match(seen, /use/);
  // Datasets no group of bob's may use are not listed to him (data-eng's), those research
  // may use are.
  assert.equal(await bob.locator('[data-testid=datasets-table] td:text-is("support-chats-2026")').count(), 0);
  assert.equal(await bob.locator('[data-testid=datasets-table] td:text-is("coco-2017")').count(), 1);
  assert.equal(await bob.locator('[data-testid=models-table] a:has-text("Delete")').count(), 0);
  assert.equal(await bob.locator('th:has-text("Groups that may use it")').count(), 0);
  assert.equal(await bob.locator('#project-name').count(), 0);
  await shot(bob, 'catalog-member');
  await member.close();

  // Moved out of vision to the top, the project leaves the rule's reach: the model's row no
  // longer names ml-research. Inside itself is not offered.
  await page.click(`[data-testid=project-tree] a[aria-label="Edit project ${project}"]`);
  await page.waitForSelector('#edit-project-parent');
  assert.equal(await page.inputValue('#edit-project-parent'), await page.locator('#edit-project-parent option', { hasText: 'vision' }).first().getAttribute('value'));
  assert.equal(await page.locator(`#edit-project-parent option:has-text("${project}")`).count(), 0);
  await page.selectOption('#edit-project-parent', { label: '— at the top —' });
  await page.click('button:has-text("Save project")');
  await page.waitForSelector('[data-testid=edit-project] [role=status] >> text=Saved.');
  await page.waitForFunction((p) => {
    const li = [...document.querySelectorAll('[data-testid=project-tree] li')].find((l) => l.textContent.includes(p));
    return li && parseFloat(li.style.paddingLeft || '0') === 0;
  }, project);
  await page.waitForFunction((m) => {
    const row = [...document.querySelectorAll('[data-testid=models-table] tbody tr')].find((r) => r.textContent.includes(m));
    return row && !row.textContent.includes('ml-research');
  }, model);

  // The project holds the model: its delete is refused with the reason.
  await page.click(`[data-testid=project-tree] a[aria-label="Delete project ${project}"]`);
  await page.click(`button:has-text("Delete project ${project}")`);
  await page.waitForSelector('[data-testid=confirm-delete] [role=alert]');
  assert.match(await page.textContent('[data-testid=confirm-delete] [role=alert]'), /The project is in use: it has 1 model/);
  await scrollTo(page, '[data-testid=confirm-delete]');
  await shot(page, 'catalog-project-in-use');

  // The model goes, confirmed; then the project.
  await modelRow(page, model).locator('a:has-text("Delete")').click();
  await page.waitForSelector(`text=Really delete model ${model}? This cannot be undone.`);
  await page.click(`button:has-text("Delete model ${model}")`);
  await page.waitForFunction((m) => !document.querySelector('[data-testid=models-table]')?.textContent.includes(m), model);
  await page.click(`[data-testid=project-tree] a[aria-label="Delete project ${project}"]`);
  // Gone from the tree once it says so, even while the catalog is still being read again.
  await slowed(page, 'catalog', 1500, async () => {
    await page.click(`button:has-text("Delete project ${project}")`);
    await page.waitForSelector('text=Project deleted.');
    assert.equal(await page.locator(`[data-testid=project-tree] >> text=${project}`).count(), 0);
  });

  // Leave ml-research as the demo had it.
  await page.goto(`${BASE}/settings`);
  await page.click('[data-testid=groups-table] a:has-text("ml-research")');
  await page.waitForSelector('[data-testid=rules-table]');
  await hydrated(page);
  await page.click('[data-testid=rules-table] a[aria-label="Delete the rule use on models in project vision and below"]');
  await page.click('button:has-text("Delete the rule use")');
  await page.waitForSelector('text=Rule deleted.');
  await context.close();
});

test('without JavaScript: a dataset with a bad location is refused at its field and keeps what was typed', async () => {
  const context = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 1440, height: 1000 } });
  const page = await context.newPage();
  const submit = (button) => Promise.all([page.waitForNavigation(), page.click(button)]);
  await signIn(page, 'acme', 'alice');
  await page.goto(`${BASE}/catalog`);
  const name = unique('nojs-data');
  await page.fill('#dataset-name', name);
  await page.selectOption('#dataset-project', { label: 'llm-finetune' });
  await page.fill('#dataset-location', 'not a location');
  await submit('button:has-text("Register dataset")');
  await page.waitForSelector('[data-field-error=location_uri]');
  assert.equal(await page.inputValue('#dataset-name'), name);
  assert.equal(await page.inputValue('#dataset-location'), 'not a location');
  assert.equal(await page.locator('#dataset-project option:checked').textContent(), 'llm-finetune');
  // The model form beside it is not filled with the dataset's input.
  assert.equal(await page.inputValue('#model-name'), '');
  await scrollTo(page, '[data-field-error=location_uri]');
  await shot(page, 'catalog-rejected-nojs');
  await page.fill('#dataset-location', 's3://acme/e2e');
  await submit('button:has-text("Register dataset")');
  await page.waitForSelector(`[data-testid=datasets-table] >> text=${name}`);
  await page.waitForSelector('[role=status] >> text=The dataset is registered.');
  assert.equal(await page.locator('[role=status] >> text=The model is registered.').count(), 0);
  // And it goes, in two steps.
  await Promise.all([page.waitForNavigation(), page.locator('[data-testid=datasets-table] tbody tr', { hasText: name }).locator('a:has-text("Delete")').click()]);
  await submit(`button:has-text("Delete dataset ${name}")`);
  assert.equal(await page.locator(`[data-testid=datasets-table] >> text=${name}`).count(), 0);
  await context.close();
});
