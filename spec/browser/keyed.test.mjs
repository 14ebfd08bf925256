// Keyed lists in Chromium (issue 29): rows with a key prop are patched by key, so a reorder or an
// insert moves the existing DOM nodes (focus, caret and typed value kept), and events reach the
// row clicked however it moved. Against the real clank-run serving spec/fixtures/apps/keyed.
//
//   CLANK_RUN=build/clank-run node --test spec/browser/keyed.test.mjs
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { chromium } from 'playwright-core';
import { fixture, startServer } from './helpers.mjs';

const CHROMIUM = process.env.CLANK_CHROMIUM || '/usr/bin/chromium';

let browser, server;
before(async () => {
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
  server = await startServer({ app: fixture('keyed/app.lua') });
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

async function openPage(view) {
  const page = await browser.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(e));
  await page.goto(`${server.base}views/${view}`);
  await page.waitForSelector('[data-clank-root][data-clank-status="open"]');
  return page;
}

// The ids of the rows, in page order.
const rowIds = (page) => page.$$eval('li', (els) => els.map((el) => el.getAttribute('data-clank-id')));

describe('keyed lists (issue 29)', () => {
  test('a reorder keeps the focused input, its caret and typed value, and its row node', async () => {
    const page = await openPage('three');
    assert.deepEqual(await rowIds(page), ['row-1', 'row-2', 'row-3']);
    assert.equal(await page.getAttribute('[data-clank-id="row-1"]', 'data-clank-key'), '0.k:rows.k:1');
    await page.click('[data-clank-id="in-1"]');
    await page.keyboard.type('hello');
    await page.keyboard.press('ArrowLeft');
    await page.keyboard.press('ArrowLeft');
    await page.evaluate(() => {
      window.row1 = document.querySelector('[data-clank-id="row-1"]');
      window.input1 = document.querySelector('[data-clank-id="in-1"]');
      window.row1.mark = 'kept';
      // a click that leaves the focus where it is
      document.querySelector('[data-clank-id="reverse"]').click();
    });
    await page.waitForFunction(() => document.querySelector('li').getAttribute('data-clank-id') === 'row-3');
    assert.deepEqual(await rowIds(page), ['row-3', 'row-2', 'row-1']);
    const state = await page.evaluate(() => {
      const input = document.querySelector('[data-clank-id="in-1"]');
      return {
        sameRow: document.querySelector('[data-clank-id="row-1"]') === window.row1 && window.row1.mark === 'kept',
        sameInput: input === window.input1,
        focused: document.activeElement === input,
        value: input.value,
        caret: [input.selectionStart, input.selectionEnd],
      };
    });
    assert.deepEqual(state, { sameRow: true, sameInput: true, focused: true, value: 'hello', caret: [3, 3] });
    // back to the top, and typing goes on at the caret
    await page.evaluate(() => document.querySelector('[data-clank-id="reverse"]').click());
    await page.waitForFunction(() => document.querySelector('li').getAttribute('data-clank-id') === 'row-1');
    await page.keyboard.type('!');
    assert.equal(await page.inputValue('[data-clank-id="in-1"]'), 'hel!lo');
    assert.ok(await page.evaluate(() => document.querySelector('[data-clank-id="row-1"]') === window.row1));
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('an insert at the top of 100 rows keeps every other row\'s DOM node', async () => {
    const page = await openPage('hundred');
    assert.equal((await rowIds(page)).length, 100);
    await page.evaluate(() => {
      window.before = Array.from(document.querySelectorAll('li'));
      window.before.forEach((li, i) => { li.mark = i + 1; });
    });
    await page.click('[data-clank-id="insert"]');
    await page.waitForFunction(() => document.querySelectorAll('li').length === 101);
    const check = await page.evaluate(() => {
      const now = Array.from(document.querySelectorAll('li'));
      return {
        first: now[0].getAttribute('data-clank-id'),
        firstMarked: 'mark' in now[0],
        same: now.slice(1).every((li, i) => li === window.before[i] && li.mark === i + 1),
      };
    });
    assert.deepEqual(check, { first: 'row--1', firstMarked: false, same: true });
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  test('after a reorder a click in a row runs that row\'s handler', async () => {
    const page = await openPage('three');
    await page.click('[data-clank-id="reverse"]');
    await page.waitForFunction(() => document.querySelector('li').getAttribute('data-clank-id') === 'row-3');
    assert.equal(await page.getAttribute('[data-clank-id="hit-1"]', 'data-clank-key'), '0.k:rows.k:1.1');
    for (const id of ['1', '3', '2']) {
      await page.click(`[data-clank-id="hit-${id}"]`);
      await page.waitForFunction((want) => document.querySelector('output').textContent === want, id);
    }
    assert.deepEqual(page.errors, []);
    await page.close();
  });
});
