// The dashboard in a real browser: a gateway on ephemeral ports, a few
// NDJSON (TCP) clients making a small graph, and headless Chromium loading
// the page from the gateway's own WebSocket port. Checks what a person
// would look at (the topic with a measured rate, the connections, the
// log...) and saves screenshots to target/dashboard.png and
// target/dashboard-dark.png.
//
// Environment:
//   ROSGATE_BIN   gateway binary (default: target/debug/rosgate, else target/release/rosgate)
//   CHROMIUM      browser (default: /usr/bin/chromium)
//   PIDFILE       if set, the PIDs of the gateway and the browser are written
//                 there, so scripts/browser.sh can stop exactly those if the
//                 run is cut short
//   SHOT_DIR      where screenshots go (default: <repo>/target)

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = process.env.ROSGATE_BIN ||
  [path.join(ROOT, 'target/debug/rosgate'), path.join(ROOT, 'target/release/rosgate')].find((p) => fs.existsSync(p));
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const SHOT_DIR = process.env.SHOT_DIR || path.join(ROOT, 'target');
const TOPIC = '/dash_test/chatter';
const RATE_HZ = 20;

const cleanups = [];
after(async () => {
  for (const f of cleanups.reverse()) { try { await f(); } catch (e) { /* best effort */ } }
});

function notePid(pid, what) {
  if (process.env.PIDFILE && pid) fs.appendFileSync(process.env.PIDFILE, `${pid} ${what}\n`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ------------------------------------------------------------ gateway

async function startGateway() {
  assert.ok(BIN && fs.existsSync(BIN), `no gateway binary (build with cargo, or set ROSGATE_BIN): ${BIN}`);
  const child = spawn(BIN, ['--listen', '127.0.0.1:0', '--ws-listen', '127.0.0.1:0'], { stdio: ['ignore', 'ignore', 'pipe'] });
  notePid(child.pid, 'rosgate');
  let stderr = '';
  const exited = new Promise((r) => child.once('exit', r));
  cleanups.push(async () => {
    if (child.exitCode == null && child.signalCode == null) {
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 4000);
      await exited;
      clearTimeout(t);
    }
  });
  const ports = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not report its ports:\n${stderr}`)), 15000);
    const found = {};
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (d) => {
      stderr += d;
      const ws = /websocket listening on ws:\/\/127\.0\.0\.1:(\d+)/.exec(stderr);
      const tcp = /rosgate \S+ listening on 127\.0\.0\.1:(\d+)/.exec(stderr);
      if (ws) found.ws = Number(ws[1]);
      if (tcp) found.tcp = Number(tcp[1]);
      if (found.ws && found.tcp) { clearTimeout(timer); resolve(found); }
    });
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`gateway exited (${code}):\n${stderr}`)); });
  });
  return { ...ports, stderr: () => stderr };
}

// ------------------------------------------------------------ NDJSON client

class Client {
  static connect(port) {
    return new Promise((resolve, reject) => {
      const c = new Client();
      c.sock = net.connect(port, '127.0.0.1', () => resolve(c));
      c.sock.once('error', reject);
      c.sock.setEncoding('utf8');
      c.sock.on('data', (d) => c.feed(d));
      c.sock.on('error', () => {});
      cleanups.push(() => c.sock.destroy());
    });
  }
  constructor() { this.buf = ''; this.msgs = []; this.waiters = []; this.seq = 0; this.arrivals = []; }
  feed(d) {
    this.buf += d;
    let i;
    while ((i = this.buf.indexOf('\n')) >= 0) {
      const line = this.buf.slice(0, i);
      this.buf = this.buf.slice(i + 1);
      if (!line) continue;
      const m = JSON.parse(line);
      if (m.op === 'publish') this.arrivals.push(performance.now());
      this.msgs.push(m);
      if (this.msgs.length > 1000) this.msgs.shift();
      for (const w of [...this.waiters]) if (w.pred(m)) { this.waiters.splice(this.waiters.indexOf(w), 1); w.resolve(m); }
    }
  }
  send(obj) { this.sock.write(JSON.stringify(obj) + '\n'); }
  wait(pred, what, ms = 5000) {
    const seen = this.msgs.find(pred);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const w = { pred, resolve };
      this.waiters.push(w);
      setTimeout(() => { this.waiters.splice(this.waiters.indexOf(w), 1); reject(new Error(`timed out waiting for ${what}`)); }, ms);
    });
  }
  async call(service, args) {
    const id = `t-${++this.seq}`;
    this.send({ op: 'call_service', service, args, id });
    const r = await this.wait((m) => m.op === 'service_response' && m.id === id, `${service} response`);
    assert.equal(r.result, true, `${service} failed: ${JSON.stringify(r.values)}`);
    return r.values;
  }
  close() { return new Promise((r) => { this.sock.once('close', r); this.sock.end(); }); }
}

// ------------------------------------------------------------ browser

async function launchBrowser() {
  assert.ok(fs.existsSync(CHROMIUM), `no browser at ${CHROMIUM} (apt-get install -y chromium)`);
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'rosgate-dash-chromium-'));
  // A fresh, empty profile (playwright passes it as --user-data-dir).
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1440, height: 1000 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  // The browser's main process is a direct child of this process.
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid && fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(profile)) notePid(pid, 'chromium');
    } catch (e) { /* gone */ }
  }
  cleanups.push(async () => { await context.close(); fs.rmSync(profile, { recursive: true, force: true }); });
  return context;
}

// ------------------------------------------------------------ the test

test('the dashboard shows a live topic with its rate, and the connections', { timeout: 150000 }, async (t) => {
  const gw = await startGateway();

  // A publisher at a steady rate and a subscriber, both over TCP, before
  // the page opens.
  const pub = await Client.connect(gw.tcp);
  pub.send({ op: 'advertise', topic: TOPIC, type: 'std_msgs/msg/String', id: 'a' });
  await pub.wait((m) => m.op === 'status' && m.id === 'a', 'advertise status');
  let n = 0;
  const ticker = setInterval(() => pub.send({ op: 'publish', topic: TOPIC, msg: { data: `hello world ${n++}` } }), 1000 / RATE_HZ);
  cleanups.push(() => clearInterval(ticker));
  const sub = await Client.connect(gw.tcp);
  sub.send({ op: 'subscribe', topic: TOPIC, type: 'std_msgs/msg/String' });
  await sub.wait((m) => m.op === 'publish' && m.topic === TOPIC, 'a message at the subscriber');
  const [pubName] = (await sub.call('/rosapi/publishers', { topic: TOPIC })).publishers;
  const [subName] = (await sub.call('/rosapi/subscribers', { topic: TOPIC })).subscribers;
  assert.match(pubName, /^\/rosgate_tcp_\d+$/);
  assert.match(subName, /^\/rosgate_tcp_\d+$/);

  const context = await launchBrowser();
  const page = context.pages()[0] || await context.newPage();
  // A failed run leaves its screenshot too (the cleanups run before the
  // browser closes).
  let shot = false;
  cleanups.push(async () => {
    if (shot) return;
    fs.mkdirSync(SHOT_DIR, { recursive: true });
    await page.screenshot({ path: path.join(SHOT_DIR, 'dashboard.png'), fullPage: true, timeout: 5000 });
  });
  const errors = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  const resp = await page.goto(`http://127.0.0.1:${gw.ws}/`);
  assert.equal(resp.status(), 200);
  await page.waitForSelector('#status[data-state="live"]', { timeout: 10000 });

  const row = page.locator(`tr.topic[data-topic="${TOPIC}"]`);
  await row.waitFor({ timeout: 10000 });
  await t.test('the topic is listed with its type, publisher and subscriber', async () => {
    const text = await row.innerText();
    assert.match(text, /std_msgs\/msg\/String/);
    assert.match(text, new RegExp(pubName));
    assert.match(text, new RegExp(subName));
  });

  // A client that arrives while the page is open: a node with parameters,
  // a service, an action and a second topic.
  const robot = await Client.connect(gw.tcp);
  robot.send({ op: 'declare_node', name: 'dash_robot', namespace: '/demo', id: 'n' });
  await robot.wait((m) => m.id === 'n', 'declare_node status');
  robot.send({ op: 'declare_parameter', name: 'max_speed', value: 1.5, descriptor: { description: 'm/s' } });
  robot.send({ op: 'declare_parameter', name: 'mode', value: 'auto' });
  robot.send({ op: 'advertise_service', service: '/demo/reset', type: 'std_srvs/srv/Trigger' });
  robot.send({ op: 'advertise_action', action: '/demo/navigate', type: 'nav2_msgs/action/NavigateToPose' });
  robot.send({ op: 'advertise', topic: '/demo/odom', type: 'nav_msgs/msg/Odometry' });
  robot.send({ op: 'subscribe', topic: '/demo/cmd_vel', type: 'geometry_msgs/msg/Twist', id: 'last' });
  await robot.wait((m) => m.id === 'last', 'robot set up');
  const odom = setInterval(() => robot.send({ op: 'publish', topic: '/demo/odom', msg: { pose: { pose: { position: { x: Math.random(), y: 0, z: 0 } } } } }), 100);
  cleanups.push(() => clearInterval(odom));

  await t.test('measuring the topic shows a non-zero rate close to the publisher\'s', async () => {
    await row.click();
    const rate = page.locator(`[data-rate="${TOPIC}"] .rate`);
    await page.waitForFunction((topic) => {
      const el = document.querySelector(`[data-rate="${topic}"] .rate`);
      return el && Number(el.dataset.hz) > 0;
    }, TOPIC, { timeout: 15000 });
    // Let the 5 s window fill for a steadier figure.
    await sleep(5500);
    const hz = Number(await rate.getAttribute('data-hz'));
    // What the TCP subscriber received over the same 5 s window.
    const until = performance.now();
    const real = sub.arrivals.filter((a) => a > until - 5000).length / 5;
    assert.ok(hz > RATE_HZ * 0.5 && hz < RATE_HZ * 1.5, `rate ${hz} Hz, expected about ${RATE_HZ}`);
    assert.ok(Math.abs(hz - real) <= Math.max(2, real * 0.15), `page says ${hz} Hz, the subscriber got ${real} Hz`);
    assert.match(await page.locator(`[data-bw="${TOPIC}"]`).innerText(), /\d.*B\/s/);
    // The detail panel: endpoints with QoS and the last message.
    const detail = await page.locator('tr.detail').innerText();
    assert.match(detail, /hello world \d+/);
    assert.match(detail, new RegExp(pubName));
  });

  await t.test('a heavy topic is sampled (1 s out of 10), not streamed to the page', async () => {
    const CAMERA = '/dash_test/camera';
    const cam = await Client.connect(gw.tcp);
    cam.send({ op: 'advertise', topic: CAMERA, type: 'sensor_msgs/msg/CompressedImage', id: 'c' });
    await cam.wait((m) => m.id === 'c', 'camera advertised');
    const frame = 'x'.repeat(64 * 1024);
    let seq = 0;
    const shots = setInterval(() => cam.send({ op: 'publish', topic: CAMERA, msg: { seq: seq++, data: frame } }), 1000 / 60);
    try {
      const camRow = page.locator(`tr.topic[data-topic="${CAMERA}"]`);
      await camRow.waitFor({ timeout: 5000 });
      await camRow.click();
      const badge = page.locator(`[data-rate="${CAMERA}"] .badge`);
      await badge.waitFor({ timeout: 8000 });
      assert.match(await badge.innerText(), /sampled/);
      // Between samples the page holds no subscription to it.
      const subs = (await cam.call('/rosapi/subscribers', { topic: CAMERA })).subscribers;
      assert.ok(!subs.some((x) => /^\/rosgate_ws_/.test(x)), `the page still subscribes: ${subs}`);
      const hz = Number(await page.locator(`[data-rate="${CAMERA}"] .rate`).getAttribute('data-hz'));
      assert.ok(hz > 10, `sampled rate ${hz} Hz`);
      await camRow.click();
    } finally {
      clearInterval(shots);
      await cam.close();
    }
    await page.locator(`tr.topic[data-topic="${CAMERA}"]`).waitFor({ state: 'detached', timeout: 5000 });
  });

  await t.test('the connections are listed, named, with transport and address', async () => {
    for (const name of [pubName, subName]) {
      const r = page.locator(`#conns-body tr[data-client="${name}"]`);
      await r.waitFor({ timeout: 10000 });
      const text = await r.innerText();
      assert.match(text, /TCP/);
      assert.match(text, /127\.0\.0\.1/);
    }
    // The robot connected while the page was open: named from the graph
    // events (its registrations belong to its declared node).
    const rows = page.locator('#conns-body tr[data-client^="/rosgate_tcp_"]');
    await page.waitForFunction(() => document.querySelectorAll('#conns-body tr[data-client^="/rosgate_tcp_"]').length === 3, null, { timeout: 10000 });
    assert.equal(await rows.count(), 3);
    assert.ok(await page.locator('#conns-body tr[data-client^="/rosgate_ws_"]').count() >= 1, 'the page\'s own connection');
  });

  await t.test('nodes, services, actions and parameters follow the graph events', async () => {
    await page.waitForFunction(() => document.querySelector('#params-body')?.innerText.includes('max_speed'), null, { timeout: 10000 });
    assert.match(await page.locator('#nodes-body').innerText(), /\/demo\/dash_robot/);
    assert.match(await page.locator('#services-body').innerText(), /\/demo\/reset/);
    const actions = await page.locator('#actions-body').innerText();
    assert.match(actions, /\/demo\/navigate/);
    assert.match(actions, /\/demo\/dash_robot/);
    const params = await page.locator('#params-body').innerText();
    assert.match(params, /1\.5/);
    assert.match(params, /"auto"/);
    await page.locator('tr.topic[data-topic="/demo/odom"]').waitFor({ timeout: 5000 });
  });

  await t.test('a connection that closes is listed with its reason, and logged', async () => {
    const visitor = await Client.connect(gw.tcp);
    visitor.send({ op: 'subscribe', topic: '/demo/odom', type: 'nav_msgs/msg/Odometry', id: 's' });
    await visitor.wait((m) => m.id === 's' && m.level === 'info', 'visitor subscribed');
    const visitorName = (await visitor.call('/rosapi/subscribers', { topic: '/demo/odom' })).subscribers.find((x) => /^\/rosgate_tcp_/.test(x));
    assert.ok(visitorName, `the visitor's connection name: ${JSON.stringify(visitor.msgs)}`);
    await sleep(600);
    await visitor.close();
    const closed = page.locator(`#closed-body tr[data-closed="${visitorName}"]`);
    await closed.waitFor({ timeout: 10000 });
    assert.match(await closed.innerText(), /peer closed/);
    await page.waitForFunction((name) => document.querySelector('#log-body')?.innerText.includes(`${name} disconnected`), visitorName, { timeout: 5000 });
    assert.match(await page.locator('#feed-body').innerText(), /disconnected: peer_closed/);
  });

  await t.test('gateway counters are shown', async () => {
    await page.waitForFunction(() => !/–/.test(document.querySelector('[data-kpi="messages"] .value')?.textContent ?? '–'), null, { timeout: 10000 });
    // The close counted by reason, at the next stats read (every 2 s).
    await page.waitForFunction(() => /peer closed/.test(document.querySelector('#health-body')?.innerText ?? ''), null, { timeout: 6000 });
  });

  fs.mkdirSync(SHOT_DIR, { recursive: true });
  await page.mouse.move(0, 0);
  await page.screenshot({ path: path.join(SHOT_DIR, 'dashboard.png'), fullPage: true });
  await page.emulateMedia({ colorScheme: 'dark' });
  await sleep(300);
  await page.screenshot({ path: path.join(SHOT_DIR, 'dashboard-dark.png'), fullPage: true });
  shot = true;

  assert.deepEqual(errors, [], 'no script errors in the page');
});
