// roslib (npm, 2.x) against a gateway that requires tokens
// (docs/security.md). Not part of the roslib suite: scripts/clients.sh
// (suite `security`) starts a gateway with --auth-tokens and passes
// ROSGATE_WS_URL, ROSGATE_ADMIN_TOKEN and ROSGATE_VIEWER_TOKEN.
//
// - the token in the URL: `ws://host:port/?token=...` (browsers and
//   roslibjs cannot set headers on a WebSocket);
// - `ros.authenticate(token, ...)` after a tokenless connect: rosbridge's
//   `auth` op, the token in its `mac` field;
// - a wrong token: the upgrade is refused (401), no connection;
// - a viewer's token: it subscribes and calls rosapi, but its publishes
//   reach no subscriber and its calls to other services fail.

import { describe, test, afterEach } from "node:test";
import assert from "node:assert/strict";
import { once } from "node:events";
import { Ros, Service, Topic } from "roslib";
import { withTimeout, collector, call, stats, ServiceFailure } from "../harness.mjs";

const WS_URL = process.env.ROSGATE_WS_URL;
const ADMIN = process.env.ROSGATE_ADMIN_TOKEN;
const VIEWER = process.env.ROSGATE_VIEWER_TOKEN;
if (!ADMIN || !VIEWER) {
  throw new Error("ROSGATE_ADMIN_TOKEN / ROSGATE_VIEWER_TOKEN are not set: run through scripts/clients.sh");
}
const STRING = "std_msgs/String";
const withToken = (token) => `${WS_URL}/?token=${encodeURIComponent(token)}`;

let counter = 0;
function unique(base) {
  counter += 1;
  return `/roslib_secure/${base}_${process.pid}_${counter}`;
}

/** Every message `ros` receives, in order (statuses included). */
function spy(ros) {
  const seen = [];
  const handle = ros.handleMessage.bind(ros);
  ros.handleMessage = (msg) => {
    seen.push(msg);
    handle(msg);
  };
  return seen;
}

/** Polls `pred` until it holds (5 s). */
async function until(pred, what) {
  const deadline = Date.now() + 5000;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function topics(ros) {
  return withTimeout(
    new Promise((resolve, reject) => ros.getTopics(resolve, reject)),
    5000,
    "getTopics",
  );
}

describe("roslib with tokens", () => {
  const open = [];
  async function connect(url) {
    const ros = new Ros({});
    ros.on("error", () => {}); // surfaced by the assertions instead
    const connected = once(ros, "connection");
    await ros.connect(url);
    await withTimeout(connected, 5000, `connect to ${url}`);
    open.push(ros);
    return ros;
  }
  afterEach(async () => {
    const closing = [];
    for (const ros of open.splice(0)) {
      if (ros.transport && !ros.transport.isClosed()) {
        closing.push(withTimeout(once(ros, "close"), 5000, "close"));
        ros.close();
      }
    }
    await Promise.all(closing);
  });

  /** Subscribes on ros, publishes on other; one message arrives, and
   * rosapi lists the topic. */
  async function roundTrip(ros, other) {
    const name = unique("round_trip");
    const got = collector();
    new Topic({ ros, name, messageType: STRING }).subscribe(got);
    await stats(ros);
    new Topic({ ros: other, name, messageType: STRING }).publish({ data: "hello" });
    assert.deepEqual(await got.waitFor(1), [{ data: "hello" }]);
    assert.ok((await topics(ros)).topics.includes(name));
  }

  test("a token in the URL admits the connection", async () => {
    const ros = await connect(withToken(ADMIN));
    const other = await connect(withToken(ADMIN));
    await roundTrip(ros, other);
  });

  test("ros.authenticate after a tokenless connect admits it", async () => {
    const ros = await connect(WS_URL);
    const seen = spy(ros);
    // Before: the request is refused with an error status (roslib
    // surfaces none for a call: read it from the wire).
    const early = call(ros, "/rosapi/get_ros_version");
    early.catch(() => {});
    await until(
      () => seen.some((m) => m.op === "status" && m.level === "error" && /^authenticate first/.test(m.msg)),
      "the refusal before authenticating",
    );
    ros.authenticate(ADMIN, "", "", "", 0, "", 0);
    const v = await withTimeout(call(ros, "/rosapi/get_ros_version"), 5000, "get_ros_version");
    assert.equal(v.version, 2);
    await roundTrip(ros, await connect(withToken(ADMIN)));
  });

  test("a wrong token is refused at the upgrade", async () => {
    const ros = new Ros({});
    const errors = [];
    ros.on("error", (e) => errors.push(String(e?.message ?? e)));
    // (events.once would reject on the "error" event that comes first.)
    const closed = new Promise((resolve) => ros.on("close", resolve));
    let connected = false;
    ros.on("connection", () => {
      connected = true;
    });
    await ros.connect(withToken(`${ADMIN}-wrong`));
    await withTimeout(closed, 5000, "the refused connection's close");
    assert.equal(connected, false);
    assert.equal(ros.isConnected, false);
    assert.ok(errors.some((e) => e.includes("401")), JSON.stringify(errors));
  });

  test("a viewer subscribes and introspects but cannot publish or call", async () => {
    const admin = await connect(withToken(ADMIN));
    const viewer = await connect(withToken(VIEWER));
    const seen = spy(viewer);
    const name = unique("guarded");
    const got = collector();
    new Topic({ ros: admin, name, messageType: STRING }).subscribe(got);
    const seenByViewer = collector();
    new Topic({ ros: viewer, name, messageType: STRING }).subscribe(seenByViewer);
    await stats(admin);
    await stats(viewer);
    // Its advertisement and publishes are refused, each with its id.
    const intruder = new Topic({ ros: viewer, name, messageType: STRING });
    for (let i = 0; i < 3; i++) intruder.publish({ data: `intruder ${i}` });
    await stats(viewer);
    const refusals = seen.filter((m) => m.op === "status" && m.level === "error");
    assert.equal(refusals.length, 4, JSON.stringify(refusals));
    for (const r of refusals) {
      assert.equal(r.msg, `forbidden: role viewer may not publish on ${name}`);
      assert.match(r.id, /^(advertise|publish):/);
    }
    new Topic({ ros: admin, name, messageType: STRING }).publish({ data: "marker" });
    assert.deepEqual(await got.waitFor(1), [{ data: "marker" }]);
    assert.deepEqual(await seenByViewer.waitFor(1), [{ data: "marker" }]);
    await stats(admin);
    assert.deepEqual(got.messages, [{ data: "marker" }]);
    // Introspection works for it...
    assert.ok((await topics(viewer)).topics.includes(name));
    // ...a call to anything else fails at once, with the reason.
    const serviceName = unique("reset");
    let handled = 0;
    const service = new Service({ ros: admin, name: serviceName, serviceType: "std_srvs/Trigger" });
    service.advertise((request, response) => {
      handled += 1;
      return true;
    });
    await stats(admin);
    await assert.rejects(
      withTimeout(call(viewer, serviceName), 5000, "the refused call"),
      (e) => e instanceof ServiceFailure && /forbidden: may not call/.test(e.message),
    );
    await withTimeout(call(admin, serviceName), 5000, "the admin's call");
    assert.equal(handled, 1);
    service.unadvertise();
  });
});
