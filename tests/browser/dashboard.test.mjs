// The dashboard in a real browser: a gateway on ephemeral ports, a few
// NDJSON (TCP) clients making a small graph, and headless Chromium loading
// the page from the gateway's own WebSocket port. Checks what a person
// would look at: every topic with its rate and bandwidth (from
// /rosgate/topic_stats, compared with what the test really publishes),
// the last message of an opened topic, the connections with their peer
// ip:port and node (from /rosgate/connections), the recently closed ones
// with their reason (also in a page opened after the close), the log, the
// counters; and saves screenshots to target/dashboard.png and
// target/dashboard-dark.png.
//
// Environment:
//   ROSGATE_BIN   gateway binary (default: target/debug/rosgate, else target/release/rosgate)
//   CHROMIUM      browser (default: /usr/bin/chromium)
//   PIDFILE       if set, the PIDs of the gateway and the browser are written
//                 there, so scripts/browser.sh can stop exactly those if the
//                 run is cut short
//   SHOT_DIR      where screenshots go (default: <repo>/target)

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { ROOT, cleanups, sleep, startGateway, Client, launchBrowser } from './harness.mjs';

const SHOT_DIR = process.env.SHOT_DIR || path.join(ROOT, 'target');
const TOPIC = '/dash_test/chatter';
const RATE_HZ = 20;

// ------------------------------------------------------------ helpers

// Publishes on `topic` every 1000/hz ms and remembers when, for the real
// rate over a recent window.
function publishEvery(client, topic, hz, msg) {
  const times = [];
  let n = 0;
  const timer = setInterval(() => {
    client.send({ op: 'publish', topic, msg: msg(n++) });
    times.push(performance.now());
    if (times.length > 4000) times.splice(0, 2000);
  }, 1000 / hz);
  const stop = () => clearInterval(timer);
  cleanups.push(stop);
  return { stop, rate: (ms) => times.filter((t) => t > performance.now() - ms).length / (ms / 1000) };
}

// What the page shows as a topic's rate (Hz) and bandwidth (B/s).
async function shownRate(page, topic) {
  return page.evaluate((t) => {
    const r = document.querySelector(`[data-rate="${t}"] .rate`);
    const b = document.querySelector(`[data-bw="${t}"] .bw`);
    return r ? { hz: Number(r.dataset.hz), bps: Number(b?.dataset.bps), text: r.textContent } : null;
  }, topic);
}
async function waitRate(page, topic, ms = 12000) {
  await page.waitForFunction((t) => Number(document.querySelector(`[data-rate="${t}"] .rate`)?.dataset.hz) > 0, topic, { timeout: ms });
}
const near = (got, want, tol) => Math.abs(got - want) <= want * tol;

// ------------------------------------------------------------ the test

test('the dashboard shows every topic\'s rate, the connections and the recent closes', { timeout: 150000 }, async (t) => {
  const gw = await startGateway();

  // A publisher at a steady rate and a subscriber, both over TCP, before
  // the page opens.
  const pub = await Client.connect(gw.tcp);
  pub.send({ op: 'advertise', topic: TOPIC, type: 'std_msgs/msg/String', id: 'a' });
  await pub.wait((m) => m.op === 'status' && m.id === 'a', 'advertise status');
  const chatter = publishEvery(pub, TOPIC, RATE_HZ, (n) => ({ data: `hello world ${n}` }));
  const sub = await Client.connect(gw.tcp);
  sub.send({ op: 'subscribe', topic: TOPIC, type: 'std_msgs/msg/String' });
  await sub.wait((m) => m.op === 'publish' && m.topic === TOPIC, 'a message at the subscriber');
  const [pubName] = (await sub.call('/rosapi/publishers', { topic: TOPIC })).publishers;
  const [subName] = (await sub.call('/rosapi/subscribers', { topic: TOPIC })).subscribers;
  assert.match(pubName, /^\/rosgate_tcp_\d+$/);
  assert.match(subName, /^\/rosgate_tcp_\d+$/);

  // Also before the page opens: a node with a double parameter whose value
  // is integral (JSON.parse reads 1.0 as 1), an integer one, and an action.
  const early = await Client.connect(gw.tcp);
  early.send({ op: 'declare_node', name: 'early', namespace: '/dash_test', id: 'e' });
  await early.wait((m) => m.op === 'status' && m.id === 'e', 'declare_node status');
  // Written out: JSON.stringify would send 1.0 as 1, an integer.
  early.sock.write('{"op":"declare_parameter","name":"gain","value":1.0}\n');
  early.send({ op: 'declare_parameter', name: 'count', value: 3 });
  early.send({ op: 'advertise_action', action: '/dash_test/dock', type: 'example_interfaces/action/Fibonacci', id: 'act' });
  await early.wait((m) => m.op === 'status' && m.id === 'act', 'advertise_action status');

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
  const watchErrors = (p) => {
    p.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
    p.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  };
  watchErrors(page);
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

  await t.test('a double parameter set before the page opened shows as a double', async () => {
    // Waits until the row of parameter `name` of `node` shows [type, value]
    // (its cells' text), then compares what it shows.
    const param = async (node, name, want) => {
      const shown = () => page.evaluate(([n, p]) => {
        for (const tr of document.querySelectorAll('#params-body tbody tr')) {
          const td = [...tr.cells].map((c) => c.innerText.trim());
          if (td[0] === n && td[1] === p) return [td[2], td[3]];
        }
        return null;
      }, [node, name]);
      const until = performance.now() + 10000;
      let got = await shown();
      while (JSON.stringify(got) !== JSON.stringify(want) && performance.now() < until) {
        await sleep(100);
        got = await shown();
      }
      assert.deepEqual(got, want, `${node} ${name}`);
    };
    await param('/dash_test/early', 'count', ['integer', '3']);
    await param('/dash_test/early', 'gain', ['double', '1.0']);
    // A change seen live (/parameter_events) is shown the same way.
    early.sock.write('{"op":"set_parameter","name":"gain","value":2.0}\n');
    await param('/dash_test/early', 'gain', ['double', '2.0']);
  });

  await t.test('an action advertised before the page opened shows its server\'s node', async () => {
    const dock = page.locator('#actions-body tr', { hasText: '/dash_test/dock' });
    await dock.waitFor({ timeout: 5000 });
    assert.match(await dock.innerText(), /\/dash_test\/early/);
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
  const odom = publishEvery(robot, '/demo/odom', 10, () => ({ pose: { pose: { position: { x: Math.random(), y: 0, z: 0 } } } }));

  await t.test('every topic shows its rate and bandwidth, without the page subscribing', async () => {
    await waitRate(page, TOPIC);
    await waitRate(page, '/demo/odom');
    // Let the window hold two intervals for a steadier figure.
    await sleep(4200);
    const c = await shownRate(page, TOPIC);
    const real = chatter.rate(4000);
    assert.ok(near(c.hz, real, 0.25), `page says ${c.hz} Hz for ${TOPIC}, the test published at ${real} Hz`);
    assert.ok(near(c.hz, RATE_HZ, 0.25), `page says ${c.hz} Hz, expected about ${RATE_HZ}`);
    // What the subscriber received over the same window agrees too.
    const got = sub.arrivals.filter((a) => a > performance.now() - 4000).length / 4;
    t.diagnostic(`${TOPIC}: page ${c.hz.toFixed(2)} Hz, published ${real.toFixed(2)} Hz, received ${got.toFixed(2)} Hz`);
    assert.ok(near(c.hz, got, 0.25), `page says ${c.hz} Hz, the subscriber got ${got} Hz`);
    // Bandwidth: the msg JSON text, {"data":"hello world N"} (22 to 26 bytes).
    const perMsg = c.bps / c.hz;
    assert.ok(perMsg > 18 && perMsg < 32, `${c.bps} B/s for ${c.hz} Hz: ${perMsg} B a message`);
    assert.match(await page.locator(`[data-bw="${TOPIC}"]`).innerText(), /\d.*B\/s/);
    const o = await shownRate(page, '/demo/odom');
    t.diagnostic(`/demo/odom: page ${o.hz.toFixed(2)} Hz, published ${odom.rate(4000).toFixed(2)} Hz`);
    assert.ok(near(o.hz, odom.rate(4000), 0.25), `page says ${o.hz} Hz for /demo/odom, the robot published at ${odom.rate(4000)} Hz`);
    // Nothing of that came from subscribing.
    for (const topic of [TOPIC, '/demo/odom']) {
      const subs = (await sub.call('/rosapi/subscribers', { topic })).subscribers;
      assert.ok(!subs.some((x) => /^\/rosgate_ws_/.test(x)), `the page subscribes to ${topic}: ${subs}`);
    }
  });

  await t.test('a topic that disappears and comes back restarts its counters: the rate follows', async () => {
    const BLINK = '/dash_test/blink';
    const blink = await Client.connect(gw.tcp);
    const advertise = async (id) => {
      blink.send({ op: 'advertise', topic: BLINK, type: 'std_msgs/msg/Int32', id });
      await blink.wait((m) => m.id === id, 'blink advertised');
    };
    await advertise('b1');
    let fast = publishEvery(blink, BLINK, 40, (n) => ({ data: n }));
    await waitRate(page, BLINK);
    await sleep(2500);
    fast.stop();
    // Gone (no publisher nor subscriber) and back at once, slower: its
    // counter starts again from 0, below what the page saw last.
    blink.send({ op: 'unadvertise', topic: BLINK });
    await advertise('b2');
    const slow = publishEvery(blink, BLINK, 8, (n) => ({ data: n }));
    const seen = [];
    const until = performance.now() + 6500;
    while (performance.now() < until) {
      const r = await shownRate(page, BLINK);
      if (r) seen.push(r.hz);
      await sleep(100);
    }
    assert.ok(seen.every((hz) => hz >= 0), `negative rates shown: ${seen}`);
    const last = (await shownRate(page, BLINK)).hz;
    t.diagnostic(`${BLINK}: page ${last.toFixed(2)} Hz after the restart, published ${slow.rate(4000).toFixed(2)} Hz`);
    assert.ok(near(last, slow.rate(4000), 0.25), `page says ${last} Hz after the restart, published at ${slow.rate(4000)} Hz`);
    slow.stop();
    await blink.close();
  });

  await t.test('opening a topic shows its endpoints and last message', async () => {
    await row.click();
    const detail = page.locator('tr.detail');
    await page.waitForFunction((name) => {
      const text = document.querySelector('tr.detail')?.innerText ?? '';
      return /hello world \d+/.test(text) && text.includes(name);
    }, pubName, { timeout: 10000 });
    const text = await detail.innerText();
    assert.match(text, /\d+ messages, .*B since it appeared/);
    // Now, and only now, the page subscribes to it.
    const subs = (await sub.call('/rosapi/subscribers', { topic: TOPIC })).subscribers;
    assert.ok(subs.some((x) => /^\/rosgate_ws_/.test(x)), `the page does not subscribe: ${subs}`);
  });

  await t.test('a heavy topic has its rate, and its last message only now and then', async () => {
    const CAMERA = '/dash_test/camera';
    const cam = await Client.connect(gw.tcp);
    cam.send({ op: 'advertise', topic: CAMERA, type: 'sensor_msgs/msg/CompressedImage', id: 'c' });
    await cam.wait((m) => m.id === 'c', 'camera advertised');
    const frame = 'x'.repeat(64 * 1024);
    const shots = publishEvery(cam, CAMERA, 60, (seq) => ({ seq, data: frame }));
    try {
      await waitRate(page, CAMERA);
      await sleep(2200);
      const c = await shownRate(page, CAMERA);
      const real = shots.rate(4000);
      t.diagnostic(`${CAMERA}: page ${c.hz.toFixed(2)} Hz ${(c.bps / 1048576).toFixed(2)} MiB/s, published ${real.toFixed(2)} Hz`);
      assert.ok(near(c.hz, real, 0.25), `page says ${c.hz} Hz for the camera, it published at ${real} Hz`);
      assert.ok(c.bps > 2 * 1024 * 1024, `camera bandwidth ${c.bps} B/s`);
      const camRow = page.locator(`tr.topic[data-topic="${CAMERA}"]`);
      await camRow.click();
      const preview = page.locator(`[data-preview="${CAMERA}"]`);
      await page.waitForFunction((sel) => /"seq": \d+/.test(document.querySelector(sel)?.innerText ?? ''), `[data-preview="${CAMERA}"]`, { timeout: 10000 });
      assert.match(await preview.locator('.badge').textContent(), /one every 5 s/);
      // Between two snapshots the page holds no subscription to it. Asked
      // on a connection of its own: on the camera's, the question would
      // queue behind the frames still unread on a loaded machine.
      const asker = await Client.connect(gw.tcp);
      let subscribed = 0;
      for (let i = 0; i < 3; i++) {
        const subs = (await asker.call('/rosapi/subscribers', { topic: CAMERA })).subscribers;
        if (subs.some((x) => /^\/rosgate_ws_/.test(x))) subscribed++;
        await sleep(300);
      }
      await asker.close();
      assert.ok(subscribed <= 1, `the page subscribed ${subscribed} times out of 3`);
      await camRow.click();
    } finally {
      shots.stop();
      await cam.close();
    }
    await page.locator(`tr.topic[data-topic="${CAMERA}"]`).waitFor({ state: 'detached', timeout: 5000 });
  });

  await t.test('the connections are listed with peer ip:port, transport and node', async () => {
    for (const [name, c] of [[pubName, pub], [subName, sub]]) {
      const r = page.locator(`#conns-body tr[data-client="${name}"]`);
      await r.waitFor({ timeout: 10000 });
      const text = await r.innerText();
      assert.match(text, /TCP/);
      assert.ok(text.includes(c.peer), `row of ${name} without its peer ${c.peer}: ${text}`);
    }
    // The robot, by its declared node, with the address of the test's socket.
    const r = page.locator(`#conns-body tr[data-peer="${robot.peer}"]`);
    await r.waitFor({ timeout: 10000 });
    assert.equal(await r.getAttribute('data-client'), '/demo/dash_robot');
    const text = await r.innerText();
    assert.match(text, /\/demo\/dash_robot/);
    assert.match(text, /TCP/);
    assert.ok(text.includes(robot.peer), text);
    // Topic messages delivered to the subscriber are counted.
    await page.waitForFunction((name) => Number(document.querySelector(`#conns-body tr[data-client="${name}"] [data-delivered]`)?.dataset.delivered) > 0, subName, { timeout: 6000 });
    // The page's own connection.
    const self = page.locator('#conns-body tr.self');
    assert.match(await self.innerText(), /this page[\s\S]*WebSocket/);
    assert.match(await self.getAttribute('data-client'), /^\/rosgate_ws_\d+$/);
    // One domain: no domain column.
    assert.doesNotMatch(await page.locator('#conns-body thead').innerText(), /domain/i);
  });

  await t.test('nodes, services, actions and parameters follow the graph events', async () => {
    await page.waitForFunction(() => document.querySelector('#params-body')?.innerText.includes('max_speed'), null, { timeout: 10000 });
    const node = page.locator('#nodes-body tr[data-node="/demo/dash_robot"]');
    assert.ok((await node.innerText()).includes(robot.peer), 'the node\'s connection');
    assert.match(await page.locator('#services-body').innerText(), /\/demo\/reset/);
    const actions = await page.locator('#actions-body').innerText();
    assert.match(actions, /\/demo\/navigate/);
    assert.match(actions, /\/demo\/dash_robot/);
    const params = await page.locator('#params-body').innerText();
    assert.match(params, /1\.5/);
    assert.match(params, /"auto"/);
    await page.locator('tr.topic[data-topic="/demo/odom"]').waitFor({ timeout: 5000 });
  });

  let visitorName, visitorPeer;
  await t.test('a connection that closes is listed with its reason, and logged', async () => {
    const visitor = await Client.connect(gw.tcp);
    visitor.send({ op: 'subscribe', topic: '/demo/odom', type: 'nav_msgs/msg/Odometry', id: 's' });
    await visitor.wait((m) => m.id === 's' && m.level === 'info', 'visitor subscribed');
    visitorName = (await visitor.call('/rosapi/subscribers', { topic: '/demo/odom' })).subscribers.find((x) => /^\/rosgate_tcp_/.test(x));
    visitorPeer = visitor.peer;
    assert.ok(visitorName, `the visitor's connection name: ${JSON.stringify(visitor.msgs)}`);
    await page.locator(`#conns-body tr[data-client="${visitorName}"]`).waitFor({ timeout: 5000 });
    await sleep(600);
    await visitor.close();
    const closed = page.locator(`#closed-body tr[data-closed="${visitorName}"]`);
    await closed.waitFor({ timeout: 5000 });
    const text = await closed.innerText();
    assert.match(text, /peer closed/);
    assert.ok(text.includes(visitorPeer), text);
    await page.locator(`#conns-body tr[data-client="${visitorName}"]`).waitFor({ state: 'detached', timeout: 5000 });
    await page.waitForFunction((name) => document.querySelector('#log-body')?.innerText.includes(`${name} disconnected`), visitorName, { timeout: 5000 });
    assert.match(await page.locator('#feed-body').innerText(), /disconnected: peer_closed/);
  });

  await t.test('a page opened later still shows the connections that closed before it', async () => {
    const late = await context.newPage();
    watchErrors(late);
    try {
      await late.goto(`http://127.0.0.1:${gw.ws}/`);
      await late.waitForSelector('#status[data-state="live"]', { timeout: 10000 });
      const closed = late.locator(`#closed-body tr[data-closed="${visitorName}"]`);
      await closed.waitFor({ timeout: 10000 });
      const text = await closed.innerText();
      assert.match(text, /peer closed/);
      assert.ok(text.includes(visitorPeer), text);
      // The camera's connection closed before too.
      assert.ok(await late.locator('#closed-body tr[data-closed^="/rosgate_tcp_"]').count() >= 2);
    } finally {
      await late.close();
    }
  });

  await t.test('the TF card shows the frame tree once frames are published', async () => {
    assert.ok(await page.locator('#tf').isHidden(), 'no frames, no TF card');
    const tf = (parent, child) => ({
      header: { stamp: { sec: 0, nanosec: 0 }, frame_id: parent }, child_frame_id: child,
      transform: { translation: { x: 1, y: 0, z: 0 }, rotation: { x: 0, y: 0, z: 0, w: 1 } },
    });
    early.send({ op: 'publish', topic: '/tf_static', msg: { transforms: [tf('dash_world', 'dash_odom'), tf('dash_odom', 'dash_laser')] } });
    await page.waitForFunction(() => /dash_laser/.test(document.querySelector('#tf-body')?.innerText ?? ''), null, { timeout: 6000 });
    const text = await page.locator('#tf-body').innerText();
    assert.ok(text.indexOf('dash_world') < text.indexOf('dash_odom') && text.indexOf('dash_odom') < text.indexOf('dash_laser'), text);
    assert.match(text, /static/);
  });

  await t.test('gateway counters and uptime are shown', async () => {
    await page.waitForFunction(() => !/–/.test(document.querySelector('[data-kpi="messages"] .value')?.textContent ?? '–'), null, { timeout: 10000 });
    assert.match(await page.locator('#uptime').innerText(), /^up \d+(s|m \d+s)$/);
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

// A free loopback port (bound, then released) for a Zenoh listener.
async function freePort() {
  const srv = net.createServer();
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address();
  await new Promise((r) => srv.close(r));
  return port;
}

test('a federated gateway\'s dashboard lists the other gateways and their nodes', { timeout: 90000 }, async () => {
  // The gateway the test runs is built with federation by `cargo test
  // --workspace`; a build without it refuses the flag: skip then.
  const zport = await freePort();
  let a;
  try {
    a = await startGateway(['--zenoh-listen', `tcp/127.0.0.1:${zport}`]);
  } catch (e) {
    if (String(e).includes('this rosgate was built without')) return;
    throw e;
  }
  const b = await startGateway(['--zenoh-connect', `tcp/127.0.0.1:${zport}`]);
  const onB = await Client.connect(b.tcp);
  onB.send({ op: 'declare_node', name: 'rover', namespace: '/far', id: 'n' });
  await onB.wait((m) => m.op === 'status' && m.id === 'n', 'declare_node status');
  onB.send({ op: 'advertise', topic: 'odom', type: 'nav_msgs/msg/Odometry', id: 'a' });
  await onB.wait((m) => m.op === 'status' && m.id === 'a', 'advertise status');
  const idB = (await onB.call('/rosgate/federation', {})).gateway;

  const context = await launchBrowser();
  const page = await context.newPage();
  const resp = await page.goto(`http://127.0.0.1:${a.ws}/`);
  assert.equal(resp.status(), 200);
  await page.waitForSelector('#status[data-state="live"]', { timeout: 10000 });
  // The card appears with B, counting its node and topic.
  const row = page.locator(`#gateways tr[data-gateway="${idB}"]`);
  await row.waitFor({ timeout: 20000 });
  await page.waitForFunction((id) => {
    const cells = document.querySelectorAll(`#gateways tr[data-gateway="${id}"] td.num`);
    return cells.length === 2 && Number(cells[0].textContent) >= 1 && Number(cells[1].textContent) >= 1;
  }, idB, { timeout: 20000 });
  assert.ok(await page.locator('#gateways').isVisible(), 'the Gateways card is shown');
  // B's node is in the page's node list (rosapi lists the federation).
  await page.waitForSelector('#nodes tr[data-node="/far/rover"]', { timeout: 20000 });
  fs.mkdirSync(SHOT_DIR, { recursive: true });
  await page.screenshot({ path: path.join(SHOT_DIR, 'dashboard-federation.png'), fullPage: true, timeout: 5000 });
  await onB.close();
});
