// What the browser tests share: the gateway binary started on ephemeral
// loopback ports, a plain NDJSON (TCP) client, headless Chromium on a fresh
// profile, and the cleanups that stop them when a test file ends.
//
// Invariant: every process a test starts is recorded in PIDFILE (when set)
// with what it is, so scripts/browser.sh can stop exactly those if the run
// is cut short; the Chromium profile directory's name starts with
// `rosgate-dash-chromium-`, which scripts/browser.sh checks before it
// signals a browser.
//
// Environment:
//   ROSGATE_BIN   gateway binary (default: target/debug/rosgate, else target/release/rosgate)
//   CHROMIUM      browser (default: /usr/bin/chromium)
//   PIDFILE       see above

import { after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = process.env.ROSGATE_BIN ||
  [path.join(ROOT, 'target/debug/rosgate'), path.join(ROOT, 'target/release/rosgate')].find((p) => fs.existsSync(p));
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

export const cleanups = [];
after(async () => {
  for (const f of cleanups.reverse()) { try { await f(); } catch (e) { /* best effort */ } }
});

export function notePid(pid, what) {
  if (process.env.PIDFILE && pid) fs.appendFileSync(process.env.PIDFILE, `${pid} ${what}\n`);
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ------------------------------------------------------------ gateway

export async function startGateway(extra = []) {
  assert.ok(BIN && fs.existsSync(BIN), `no gateway binary (build with cargo, or set ROSGATE_BIN): ${BIN}`);
  const child = spawn(BIN, ['--listen', '127.0.0.1:0', '--ws-listen', '127.0.0.1:0', ...extra], { stdio: ['ignore', 'ignore', 'pipe'] });
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

export class Client {
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
  // ip:port of this client as the gateway sees it.
  get peer() { return `${this.sock.localAddress}:${this.sock.localPort}`; }
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

export async function launchBrowser() {
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

