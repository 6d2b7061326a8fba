// cdp.js loads one page of the Temporal Web UI in headless Chromium and waits until the
// rendered text shows every --wait string, then writes the page's DOM (--html) and a
// screenshot (--png). It speaks the DevTools protocol over --remote-debugging-pipe, so it
// needs nothing but Node.js and Debian's chromium. The UI is a JavaScript app that keeps
// long-polling a running workflow: Chromium's --dump-dom never returns on such a page.
//
//   node cdp.js --url URL [--wait TEXT]... [--html FILE] [--png FILE] [--timeout SECONDS]
//
// Exit status 1 names the --wait strings that never showed up (the DOM is written anyway).
'use strict';
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const args = { wait: [], timeout: 60 };
for (let i = 2; i < process.argv.length; i += 2) {
  const key = process.argv[i].replace(/^--/, '');
  const value = process.argv[i + 1];
  if (key === 'wait') args.wait.push(value); else args[key] = value;
}
if (!args.url) {
  console.error('usage: node cdp.js --url URL [--wait TEXT]... [--html FILE] [--png FILE] [--timeout SECONDS]');
  process.exit(2);
}

const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'subflow-chrome-'));
const chrome = spawn(process.env.CHROMIUM || 'chromium', [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--hide-scrollbars', '--remote-debugging-pipe', `--user-data-dir=${profile}`, 'about:blank',
], { stdio: ['ignore', 'ignore', 'ignore', 'pipe', 'pipe'] });
const toChrome = chrome.stdio[3];
const fromChrome = chrome.stdio[4];

// Messages are JSON, each ended by a NUL byte.
let nextId = 1;
const pending = new Map();
let buffered = '';
fromChrome.on('data', (chunk) => {
  buffered += chunk.toString('utf8');
  let end;
  while ((end = buffered.indexOf('\0')) >= 0) {
    const msg = JSON.parse(buffered.slice(0, end));
    buffered = buffered.slice(end + 1);
    const waiter = msg.id && pending.get(msg.id);
    if (!waiter) continue;
    pending.delete(msg.id);
    if (msg.error) waiter.reject(new Error(`${waiter.method}: ${msg.error.message}`));
    else waiter.resolve(msg.result);
  }
});
function send(method, params = {}, sessionId) {
  const id = nextId++;
  toChrome.write(JSON.stringify({ id, method, params, sessionId }) + '\0');
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject, method }));
}
// RENDERED_TEXT is the page's visible text plus that of its iframes: the UI renders a run's
// Markdown summary and details in sandboxed srcdoc frames, whose text only the frame source shows.
const RENDERED_TEXT = `(document.body ? document.body.innerText : "") + "\\n" +
  [...document.querySelectorAll("iframe")].map((f) => {
    try { return f.contentDocument.body.innerText; } catch (e) { return (f.srcdoc || "").replace(/<[^>]*>/g, ""); }
  }).join("\\n")`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
  const page = (method, params) => send(method, params, sessionId);
  await page('Page.enable');
  await page('Emulation.setDeviceMetricsOverride', { width: 1600, height: 1000, deviceScaleFactor: 1, mobile: false });
  await page('Page.navigate', { url: args.url });

  const text = async (expr) => (await page('Runtime.evaluate', { expression: expr, returnByValue: true })).result.value || '';
  const deadline = Date.now() + Number(args.timeout) * 1000;
  let missing = args.wait;
  for (;;) {
    const body = await text(RENDERED_TEXT);
    missing = args.wait.filter((w) => !body.includes(w));
    if (missing.length === 0 || Date.now() > deadline) break;
    await sleep(250);
  }
  await sleep(500); // let the last render settle before the picture
  // The frames' documents too: the UI renders Markdown (Current Details) in a frame.
  if (args.html) fs.writeFileSync(args.html, await text(`document.documentElement.outerHTML + "\\n" +
    [...document.querySelectorAll("iframe")].map((f) => {
      try { return f.contentDocument.documentElement.outerHTML; } catch (e) { return f.srcdoc || ""; }
    }).join("\\n")`));
  if (args.png) {
    const shot = await page('Page.captureScreenshot', { format: 'png' });
    fs.writeFileSync(args.png, Buffer.from(shot.data, 'base64'));
  }
  return missing;
}

const watchdog = setTimeout(() => { console.error('cdp: no answer from chromium'); finish(3); }, (Number(args.timeout) + 30) * 1000);
let finishing = false;
async function finish(code) {
  if (finishing) return;
  finishing = true;
  clearTimeout(watchdog);
  const exited = new Promise((resolve) => {
    if (chrome.exitCode !== null || chrome.signalCode !== null) resolve();
    else chrome.once('exit', resolve);
  });
  send('Browser.close').catch(() => {});
  const killer = setTimeout(() => chrome.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(killer);
  try {
    fs.rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
  } catch (err) {
    console.error(`cdp: remove ${profile}: ${err.message}`);
  }
  process.exit(code);
}
main().then((missing) => {
  if (missing.length > 0) console.error(`cdp: ${args.url} never showed: ${missing.map((m) => JSON.stringify(m)).join(', ')}`);
  finish(missing.length > 0 ? 1 : 0);
}, (err) => {
  console.error(`cdp: ${err.message}`);
  finish(3);
});
