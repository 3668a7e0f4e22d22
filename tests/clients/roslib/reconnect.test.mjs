// Reconnect through roslib 2.x: a connection lost without a close
// handshake is cleaned up by rosgate (registrations withdrawn, calls waiting
// on it failed), and roslib's Topic objects re-subscribe and re-advertise
// on the new connection (reconnect_on_close, the default).

import { describe, test, afterEach } from "node:test";
import assert from "node:assert/strict";
import { once } from "node:events";
import { Service, Topic } from "roslib";
import { TRANSPORTS, Session, ServiceFailure, call, collector, stats, unique, withTimeout, sleep } from "./harness.mjs";

const STRING = "std_msgs/String";

/** Polls /rosgate/stats on `ros` until `pred` holds. */
async function until(ros, pred, what, ms = 5000) {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    last = await stats(ros);
    if (pred(last)) return last;
    await sleep(50);
  }
  assert.fail(`${what}; last stats: ${JSON.stringify(last)}`);
}

for (const transport of TRANSPORTS) {
  describe(`reconnect over ${transport.name}`, () => {
    let session;
    afterEach(async () => {
      await session?.closeAll();
      session = undefined;
    });

    test("topics resume after the connection is lost and re-established", async () => {
      session = new Session(transport);
      const ros = await session.connect();
      const peer = await session.connect();
      const base = await stats(peer);
      const inName = unique(transport, "in");
      const outName = unique(transport, "out");

      // ros subscribes to inName and publishes on outName; peer does the reverse.
      const inbound = new Topic({ ros, name: inName, messageType: STRING });
      const gotIn = collector();
      inbound.subscribe(gotIn);
      const outbound = new Topic({ ros, name: outName, messageType: STRING });
      outbound.advertise();
      const peerSub = new Topic({ ros: peer, name: outName, messageType: STRING });
      const gotOut = collector();
      peerSub.subscribe(gotOut);
      const peerPub = new Topic({ ros: peer, name: inName, messageType: STRING });
      await stats(ros);
      await stats(peer);

      peerPub.publish({ data: "in-1" });
      outbound.publish({ data: "out-1" });
      await gotIn.waitFor(1);
      await gotOut.waitFor(1);
      const during = await stats(peer);

      // Lose the connection abruptly; rosgate must withdraw its registrations.
      const closed = once(ros, "close");
      transport.drop(ros);
      await withTimeout(closed, 5000, "close event");
      await until(
        peer,
        (s) => s.subscriptions === during.subscriptions - 1 && s.publishers === during.publishers - 1,
        "the lost connection's subscription and advertisement were not withdrawn",
      );

      // Reconnect: roslib re-sends the subscribe and advertise it queued on close.
      await session.reconnect(ros);
      await stats(ros);
      const after = await stats(peer);
      assert.equal(after.subscriptions, during.subscriptions, "re-subscribed exactly once");
      assert.equal(after.publishers, during.publishers, "re-advertised exactly once");
      assert.equal(after.connections_open, base.connections_open, "the old connection is gone");

      peerPub.publish({ data: "in-2" });
      outbound.publish({ data: "out-2" });
      await gotIn.waitFor(2);
      await gotOut.waitFor(2);
      await stats(peer);
      await stats(ros);
      await sleep(100);
      assert.deepEqual(gotIn.messages.map((m) => m.data), ["in-1", "in-2"]);
      assert.deepEqual(gotOut.messages.map((m) => m.data), ["out-1", "out-2"]);
    });

    test("a call waiting on a provider that vanishes fails at once", async () => {
      session = new Session(transport);
      const provider = await session.connect();
      const caller = await session.connect();
      const name = unique(transport, "vanish");
      const server = new Service({ ros: provider, name, serviceType: "any/Any" });
      let received;
      const requestSeen = new Promise((resolve) => (received = resolve));
      await server.advertiseAsync(() => {
        received();
        return new Promise(() => {}); // never answers
      });
      await stats(provider);

      const started = Date.now();
      const pending = call(caller, name, { x: 1 }, 30);
      await withTimeout(requestSeen, 5000, "request forwarded to the provider");
      transport.drop(provider);
      const err = await withTimeout(pending.then(
        (v) => assert.fail(`unexpected success ${JSON.stringify(v)}`),
        (e) => e,
      ), 5000, "failure after the provider vanished");
      assert.ok(err instanceof ServiceFailure, String(err));
      assert.ok(Date.now() - started < 5000, "must not wait for the 30 s call timeout");

      // The service is gone with its provider.
      await withTimeout(call(caller, name, {}).then(
        () => assert.fail("service should be gone"),
        (e) => assert.ok(e instanceof ServiceFailure),
      ), 3000, "call after provider loss");
    });

    test("a service can be advertised again after reconnecting", async () => {
      session = new Session(transport);
      const provider = await session.connect();
      const caller = await session.connect();
      const name = unique(transport, "readv");
      const server = new Service({ ros: provider, name, serviceType: "any/Any" });
      await server.advertiseAsync(async () => ({ gen: 1 }));
      await stats(provider);
      assert.deepEqual(await call(caller, name, {}), { gen: 1 });

      const closed = once(provider, "close");
      transport.drop(provider);
      await withTimeout(closed, 5000, "close event");
      await session.reconnect(provider);
      // roslib does not re-advertise services by itself: do it explicitly,
      // on the same Service object (which first withdraws its old handler).
      await server.advertiseAsync(async () => ({ gen: 2 }));
      await stats(provider);
      assert.deepEqual(await withTimeout(call(caller, name, {}), 5000, "call"), { gen: 2 });
    });
  });
}
