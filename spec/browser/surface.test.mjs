// The agent surface's wrappers in Chromium (SPEC §9: "Other elements appear only as wrappers of
// kept children"; §11: "for the same session, inspect() in the browser deep-equals the server's
// inspect() of the mounted view; the root of a mounted view is its container, so the view's own
// top element is listed (as a wrapper when it has no id or role)"). Against the real clank-run
// serving spec/fixtures/apps/surface_wrappers; expected nodes written by hand from the SPEC.
//
//   CLANK_RUN=build/clank-run node --test spec/browser/surface.test.mjs
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { chromium } from 'playwright-core';
import { fixture, json, request, startServer } from './helpers.mjs';

const CHROMIUM = process.env.CLANK_CHROMIUM || '/usr/bin/chromium';

let browser, server;
before(async () => {
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
  server = await startServer({ app: fixture('surface_wrappers/app.lua') });
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

async function openPage() {
  const page = await browser.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(e));
  await page.goto(`${server.base}views/board`);
  await page.waitForSelector('[data-clank-root][data-clank-status="open"]');
  page.session = await page.getAttribute('[data-clank-root]', 'data-clank-session');
  return page;
}

const browserNodes = (page) => page.evaluate(() =>
  window.clank.createAgentSurface(document.querySelector('[data-clank-root]')).inspect());

async function serverNodes(session) {
  const res = await request(server, `/__clank/sessions/${encodeURIComponent(session)}/surface`);
  assert.equal(res.status, 200, res.text);
  return json(res).nodes;
}

const row = (i) => ({ tag: 'tr', children: [{ tag: 'td', children: [
  { id: `open-${i}`, tag: 'button', role: 'button', label: 'Open' }] }] });

// What §9 lists for the board with n rows.
const expected = (n) => [{ tag: 'main', children: [
  { tag: 'header', children: [{ tag: 'div', children: [{ tag: 'nav', children: [
    { tag: 'a', role: 'link', label: 'Help', href: '/help' }] }] }] },
  // the section holds nothing kept: not listed; nor is the hidden div
  { tag: 'table', children: [
    { tag: 'tbody', children: Array.from({ length: n }, (_, i) => row(i + 1)) },
    { tag: 'tfoot', children: [{ tag: 'tr', children: [{ tag: 'td', children: [
      { id: 'count', tag: 'output', label: String(n) }] }] }] }] },
  { tag: 'footer', children: [{ id: 'add', tag: 'button', role: 'button', label: 'Add' }] },
] }];

describe('the agent surface\'s wrappers (SPEC §9)', () => {
  test('list elements that are not kept as wrappers of kept children, alike in the browser and the server', async () => {
    const page = await openPage();
    try {
      assert.deepEqual(await serverNodes(page.session), expected(1));
      assert.deepEqual(await browserNodes(page), expected(1));
      // after a change the browser's DOM was patched: still the same nodes on both sides
      await page.click('[data-clank-id="add"]');
      await page.waitForSelector('[data-clank-id="open-2"]');
      await page.waitForFunction(() => document.getElementById('count')?.textContent === '2');
      assert.deepEqual(await browserNodes(page), expected(2));
      assert.deepEqual(await serverNodes(page.session), expected(2));
      assert.deepEqual(page.errors, []);
    } finally {
      await page.close();
    }
  });
});
