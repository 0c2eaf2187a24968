// The chat page of `fathom serve` in a real headless browser (Debian's chromium, driven by
// playwright-core): type a message, press Enter, wait for the streamed reply to finish, then
// check the reply text, the usage line and a second turn that reuses the first's cache.
// Usage: node check_page.mjs http://127.0.0.1:PORT [screenshot.png]
import { chromium } from 'playwright-core';

const url = process.argv[2];
const shot = process.argv[3];
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox'],
});
const fail = async (msg) => { console.error('page test: ' + msg); await browser.close(); process.exit(1); };
try {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', e => errors.push(e.message));
  await page.goto(url);
  await page.waitForFunction(() => document.getElementById('model').textContent.length > 0);
  for (const [turn, text] of [[1, 'Hello there'], [2, 'Tell me more']]) {
    await page.fill('#input', text);
    await page.press('#input', 'Enter');
    await page.waitForSelector(`.msg.assistant:nth-of-type(${2 * turn})[data-done="1"]`, { timeout: 120000 });
  }
  const replies = await page.$$eval('.msg.assistant', els => els.map(e => ({
    text: e.children[1].textContent, stats: e.querySelector('.stats').textContent })));
  const users = await page.$$eval('.msg.user', els => els.map(e => e.textContent));
  if (users.join('|') !== 'Hello there|Tell me more') await fail('user messages: ' + users);
  if (replies.length !== 2) await fail(`${replies.length} replies`);
  for (const r of replies) {
    if (!r.text.trim()) await fail('an empty reply');
    if (!/\d+ tokens in [\d.]+ s, \d+ prompt tokens \(\d+ cached\)/.test(r.stats)) await fail('stats: ' + r.stats);
  }
  const cached = Number(/\((\d+) cached\)/.exec(replies[1].stats)[1]);
  if (!(cached > 0)) await fail('the second turn reused no cached tokens: ' + replies[1].stats);
  if (errors.length) await fail('page errors: ' + errors.join('; '));
  if (shot) await page.screenshot({ path: shot, fullPage: true });
  console.log(`page test: ok (replies of ${replies.map(r => r.text.length).join(' and ')} chars; ` +
    `second turn: ${replies[1].stats})`);
} catch (e) {
  await fail(e.message);
}
await browser.close();
