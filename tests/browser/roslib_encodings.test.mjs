// roslib 2.1 in headless Chromium subscribing to a camera-sized image in
// each of rosgate's outgoing encodings (docs/protocol.md, "Outgoing
// encodings"): a 640x480 rgb8 sensor_msgs/msg/Image published by another
// client (NDJSON over TCP, `data` in base64 as rosbridge clients send
// uint8[]), received by four roslib connections in one page, with
// compression none (JSON), `cbor`, `cbor-raw` and `png`. Every message's
// values are checked in the page: height, width, encoding, step and all
// 921600 bytes (JSON and png: the base64 text; cbor: roslib's Uint8Array;
// cbor-raw: the CDR read field by field, per the OMG DDS-XTypes CDR rules
// ROS 2 uses). roslib 2.1 decodes png with fast-png in the browser too
// (RosLib.js: `decode` from "fast-png" after `atob`), not with a canvas.
//
// The figure: for each encoding, how long roslib takes from the WebSocket
// `message` event to handing the application the message (a listener added
// before roslib's records performance.now() at receipt; the Topic callback
// reads it first thing), median over N messages, with the frame size. For
// JSON the application then still has base64 text: the time to turn it
// into bytes (atob) is shown apart. The figures are printed as test
// diagnostics and written to target/browser-encodings.txt.
//
// The page and roslib's ES modules are served from tests/browser/node_modules
// by a loopback HTTP server of the test's own (an import map names each bare
// import); the page's WebSockets go to the gateway on 127.0.0.1.
//
// Environment: as harness.mjs; ENCODINGS_N (default 30) messages.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { ROOT, cleanups, startGateway, Client, launchBrowser } from './harness.mjs';

const N = Number(process.env.ENCODINGS_N || 30);
const TOPIC = '/browser_test/image';
const TYPE = 'sensor_msgs/msg/Image';
const WIDTH = 640;
const HEIGHT = 480;
const ENCODINGS = ['json', 'cbor', 'cbor-raw', 'png'];
const MODULES = path.join(path.dirname(new URL(import.meta.url).pathname), 'node_modules');

// Bare imports of roslib 2.1's RosLib.js and of its dependencies, to files
// of the installed packages (their ES module entries for browsers, as
// roslib's own importmap.js names them).
const IMPORTS = {
  roslib: 'roslib/dist/RosLib.js',
  eventemitter3: 'eventemitter3/dist/eventemitter3.esm.js',
  uuid: 'uuid/dist/index.js',
  bson: 'bson/lib/bson.mjs',
  cbor2: 'cbor2/lib/index.js',
  'fast-png': 'fast-png/lib/index.js',
  fflate: 'fflate/esm/browser.js',
  iobuffer: 'iobuffer/lib/iobuffer.js',
  '@cto.af/wtf8': '@cto.af/wtf8/lib/index.js',
  ws: 'ws/browser.js',
};

// Byte i of message `seq`: every byte depends on both, so a stale, shifted
// or truncated image shows.
const pixel = (seq, i) => (i + 31 * seq + (i >> 11)) & 255;

function image(seq) {
  const data = Buffer.alloc(WIDTH * HEIGHT * 3);
  for (let i = 0; i < data.length; i++) data[i] = pixel(seq, i);
  return {
    header: { stamp: { sec: 1000 + seq, nanosec: 7 }, frame_id: 'camera' },
    height: HEIGHT,
    width: WIDTH,
    encoding: 'rgb8',
    is_bigendian: 0,
    step: WIDTH * 3,
    data: data.toString('base64'),
  };
}

const PAGE = `<!doctype html><meta charset="utf-8"><title>roslib encodings</title>
<script type="importmap">${JSON.stringify({
  imports: Object.fromEntries(Object.entries(IMPORTS).map(([k, v]) => [k, `/nm/${v}`])),
})}</script>
<script type="module">import * as ROSLIB from 'roslib'; window.ROSLIB = ROSLIB; window.ready = true;</script>`;

// Runs in the page before anything else: each WebSocket (its URL names the
// encoding in ?enc=) notes when a message event arrives, before roslib's
// own listener (registered later) runs.
function hookWebSockets() {
  const Native = window.WebSocket;
  window.rx = {};
  window.frameSize = {};
  window.WebSocket = class extends Native {
    constructor(url, protocols) {
      super(url, protocols);
      const enc = new URL(url).searchParams.get('enc');
      this.addEventListener('message', (e) => {
        window.rx[enc] = performance.now();
        window.frameSize[enc] = typeof e.data === 'string' ? e.data.length : e.data.byteLength;
      });
    }
  };
}

// Runs in the page: four connections, one subscription each; the callback
// times the hand-over, then checks the message.
async function subscribeAll({ url, topic, type, encodings, width, height, pixelSrc }) {
  const pixel = new Function(`return ${pixelSrc}`)();
  const fromBase64 = (s) => {
    const bin = atob(s);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  };
  // sensor_msgs/msg/Image in CDR (little-endian; alignment counted from
  // after the 4-byte encapsulation header).
  const readCdr = (bytes) => {
    const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    assertEq(dv.getUint16(0), 0x0001, 'CDR_LE encapsulation');
    let pos = 4;
    const align = (n) => { pos = 4 + Math.ceil((pos - 4) / n) * n; };
    const u32 = () => { align(4); const v = dv.getUint32(pos, true); pos += 4; return v; };
    const str = () => { const n = u32(); const s = new TextDecoder().decode(bytes.subarray(pos, pos + n - 1)); pos += n; return s; };
    const sec = u32(); const nanosec = u32(); const frame_id = str();
    const h = u32(); const w = u32(); const encoding = str();
    const is_bigendian = bytes[pos]; pos += 1;
    const step = u32(); const n = u32();
    const data = bytes.subarray(pos, pos + n);
    assertEq(pos + n <= bytes.length, true, 'data within the CDR');
    return { header: { stamp: { sec, nanosec }, frame_id }, height: h, width: w, encoding, is_bigendian, step, data };
  };
  function assertEq(got, want, what) {
    if (got !== want) throw new Error(`${what}: got ${got}, want ${want}`);
  }
  const check = (enc, m) => {
    const seq = m.header.stamp.sec - 1000;
    assertEq(m.header.stamp.nanosec, 7, 'nanosec');
    assertEq(m.header.frame_id, 'camera', 'frame_id');
    assertEq(m.height, height, 'height');
    assertEq(m.width, width, 'width');
    assertEq(m.encoding, 'rgb8', 'encoding');
    assertEq(m.step, width * 3, 'step');
    const data = typeof m.data === 'string' ? fromBase64(m.data) : m.data;
    assertEq(data instanceof Uint8Array, true, `${enc}: data is bytes`);
    assertEq(data.length, width * height * 3, 'data length');
    for (let i = 0; i < data.length; i++) {
      if (data[i] !== pixel(seq, i)) throw new Error(`${enc} message ${seq}: byte ${i} is ${data[i]}, want ${pixel(seq, i)}`);
    }
    return seq;
  };

  window.results = {};
  for (const enc of encodings) {
    const r = (window.results[enc] = { micros: [], toBytesMicros: [], seqs: [], errors: [] });
    const ros = new window.ROSLIB.Ros({ url: `${url}/?enc=${enc}` });
    await new Promise((resolve, reject) => {
      ros.on('connection', resolve);
      ros.on('error', reject);
    });
    const sub = new window.ROSLIB.Topic({ ros, name: topic, messageType: type, compression: enc === 'json' ? 'none' : enc });
    sub.subscribe((msg) => {
      const handed = performance.now();
      r.micros.push(Math.round((handed - window.rx[enc]) * 1000));
      try {
        if (enc === 'json') {
          const t0 = performance.now();
          fromBase64(msg.data);
          r.toBytesMicros.push(Math.round((performance.now() - t0) * 1000));
        }
        r.seqs.push(check(enc, enc === 'cbor-raw' ? readCdr(msg.bytes) : msg));
      } catch (e) {
        r.errors.push(String(e && e.message || e));
        r.seqs.push(-1);
      }
    });
  }
}

// The page and the installed packages' files, from a loopback HTTP server
// (what a local development server is): the gateway accepts WebSockets
// from loopback pages (docs/security.md, "Origins"), and Chromium's local
// network access checks let a loopback page reach a loopback port.
// Cross-origin isolation: performance.now() then ticks in 5 µs steps, not
// 100 µs (https://w3c.github.io/hr-time/#dfn-coarsen-time); the page
// loads only its own origin's files, and WebSockets are not subject to it.
const ISOLATED = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };

async function serveFiles() {
  const server = http.createServer((req, res) => {
    const p = new URL(req.url, 'http://x').pathname;
    if (p === '/') {
      res.writeHead(200, { 'content-type': 'text/html', ...ISOLATED });
      return res.end(PAGE);
    }
    const file = path.join(MODULES, decodeURIComponent(p.replace(/^\/nm\//, '')));
    if (!p.startsWith('/nm/') || !file.startsWith(MODULES + path.sep) || !fs.existsSync(file)) {
      res.writeHead(404);
      return res.end('not found');
    }
    res.writeHead(200, { 'content-type': 'text/javascript', ...ISOLATED });
    res.end(fs.readFileSync(file));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((r) => { server.closeAllConnections(); server.close(r); }));
  return `http://127.0.0.1:${server.address().port}`;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : NaN;
};

test('roslib in Chromium decodes a 640x480 rgb8 image in JSON, cbor, cbor-raw and png', { timeout: 120000 }, async (t) => {
  const gw = await startGateway();
  const pub = await Client.connect(gw.tcp);
  pub.send({ op: 'advertise', topic: TOPIC, type: TYPE, id: 'adv' });
  await pub.wait((m) => m.op === 'status' && m.id === 'adv', 'advertise status');

  const origin = await serveFiles();
  const context = await launchBrowser();
  const page = context.pages()[0] || await context.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  await page.addInitScript(hookWebSockets);
  await page.goto(`${origin}/`);
  await page.waitForFunction(() => window.ready === true, null, { timeout: 15000 });
  assert.equal(await page.evaluate(() => window.crossOriginIsolated), true, 'the page is cross-origin isolated (fine timer)');

  await page.evaluate(subscribeAll, {
    url: `ws://127.0.0.1:${gw.ws}`, topic: TOPIC, type: TYPE, encodings: ENCODINGS,
    width: WIDTH, height: HEIGHT, pixelSrc: pixel.toString(),
  });
  // All four subscriptions are in place at the gateway before the first
  // publish (each connection's subscribe is handled when it arrives).
  const deadline = Date.now() + 10000;
  for (;;) {
    const info = await pub.call('/rosgate/topic_info', { topic: TOPIC });
    if (info.subscribers.length === ENCODINGS.length) break;
    assert.ok(Date.now() < deadline, `subscribers at the gateway: ${JSON.stringify(info.subscribers)}`);
    await new Promise((r) => setTimeout(r, 50));
  }

  // One image at a time: the next once every connection handed this one
  // over, so the timings are of one message each, never of a backlog.
  const started = performance.now();
  for (let seq = 0; seq < N; seq++) {
    pub.send({ op: 'publish', topic: TOPIC, msg: image(seq) });
    await page.waitForFunction((k) => Object.values(window.results).every((r) => r.seqs.length > k), seq, { timeout: 15000 })
      .catch(async (e) => {
        const counts = await page.evaluate(() => Object.fromEntries(Object.entries(window.results).map(([k, r]) => [k, r.seqs.length])));
        throw new Error(`image ${seq} not handed over by every connection: ${JSON.stringify(counts)} (${e.message})`);
      });
  }
  const elapsed = (performance.now() - started) / 1000;
  const { results, frameSize } = await page.evaluate(() => ({ results: window.results, frameSize: window.frameSize }));
  assert.deepEqual(pageErrors, [], 'no uncaught errors in the page');

  const lines = [
    `roslib 2.1 in Chromium ${context.browser()?.version() ?? ''}: one 640x480 rgb8 sensor_msgs/msg/Image (921600 bytes of data), ` +
      `WebSocket message event -> Topic callback, median of ${N} (gateway ${path.basename(path.dirname(process.env.ROSGATE_BIN || 'debug/x'))} build)`,
  ];
  for (const enc of ENCODINGS) {
    const r = results[enc];
    assert.deepEqual(r.errors, [], `${enc}: every message's values`);
    assert.deepEqual(r.seqs, [...Array(N).keys()], `${enc}: each image once, in order`);
    let line = `  ${enc.padEnd(8)} frame ${String(frameSize[enc]).padStart(8)} B  median ${(median(r.micros) / 1000).toFixed(2).padStart(7)} ms` +
      `  min ${(Math.min(...r.micros) / 1000).toFixed(2).padStart(7)} ms`;
    if (enc === 'json') line += `  (+ base64 -> bytes in the app: median ${(median(r.toBytesMicros) / 1000).toFixed(2)} ms)`;
    lines.push(line);
  }
  lines.push(`  ${N} images to 4 connections in ${elapsed.toFixed(1)} s`);
  for (const l of lines) t.diagnostic(l);
  fs.mkdirSync(path.join(ROOT, 'target'), { recursive: true });
  fs.writeFileSync(path.join(ROOT, 'target/browser-encodings.txt'), lines.join('\n') + '\n');
});
