// Topics through roslib 2.x: two Topic objects on one connection, per-id
// unsubscribe and unadvertise, and delivery across connections.

import { describe, test, afterEach } from "node:test";
import assert from "node:assert/strict";
import { Topic } from "roslib";
import { TRANSPORTS, Session, collector, stats, unique, sleep } from "./harness.mjs";

const STRING = "std_msgs/String";

for (const transport of TRANSPORTS) {
  describe(`topics over ${transport.name}`, () => {
    let session;
    afterEach(async () => {
      await session?.closeAll();
      session = undefined;
    });

    test("two Topic objects on one connection both receive each message once", async () => {
      session = new Session(transport);
      const ros = await session.connect();
      const name = unique(transport, "pair");
      const a = new Topic({ ros, name, messageType: STRING });
      const b = new Topic({ ros, name, messageType: STRING });
      const gotA = collector();
      const gotB = collector();
      a.subscribe(gotA);
      b.subscribe(gotB);
      const publisher = new Topic({ ros, name, messageType: STRING });
      await stats(ros);

      for (let i = 0; i < 3; i++) publisher.publish({ data: `m${i}` });
      await stats(ros); // publishes before it are fanned out before it answers
      await gotA.waitFor(3);
      await gotB.waitFor(3);
      await sleep(100);
      assert.deepEqual(gotA.messages.map((m) => m.data), ["m0", "m1", "m2"]);
      assert.deepEqual(gotB.messages.map((m) => m.data), ["m0", "m1", "m2"]);
    });

    if (transport.perIdRegistrations) {
      test("unsubscribe of one Topic (by its id) keeps the other subscribed", async () => {
        session = new Session(transport);
        const ros = await session.connect();
        const pubRos = await session.connect();
        const name = unique(transport, "unsub");
        const base = (await stats(pubRos)).subscriptions;

        const a = new Topic({ ros, name, messageType: STRING });
        const b = new Topic({ ros, name, messageType: STRING });
        const gotA = collector();
        const gotB = collector();
        a.subscribe(gotA);
        b.subscribe(gotB);
        // Spy on every publish frame the connection receives for the topic.
        const frames = collector();
        ros.on(name, frames);
        await stats(ros);
        assert.equal((await stats(pubRos)).subscriptions, base + 1);

        const publisher = new Topic({ ros: pubRos, name, messageType: STRING });
        publisher.publish({ data: "before" });
        await gotA.waitFor(1);
        await gotB.waitFor(1);

        a.unsubscribe(); // sends unsubscribe with a's subscribe id
        await stats(ros);
        publisher.publish({ data: "after-a" });
        await gotB.waitFor(2);
        assert.equal(gotB.messages[1].data, "after-a", "b must stay subscribed");
        assert.equal(gotA.messages.length, 1);
        assert.equal((await stats(pubRos)).subscriptions, base + 1);

        b.unsubscribe();
        await stats(ros);
        assert.equal((await stats(pubRos)).subscriptions, base);
        const framesBefore = frames.messages.length;
        publisher.publish({ data: "after-b" });
        await stats(pubRos);
        await stats(ros);
        await sleep(100);
        assert.equal(frames.messages.length, framesBefore, "no delivery after the last unsubscribe");
        assert.equal(gotB.messages.length, 2);
      });

      test("unadvertise of one Topic (by its id) keeps the other advertised", async () => {
        session = new Session(transport);
        const ros = await session.connect();
        const subRos = await session.connect();
        const name = unique(transport, "unadv");
        const base = (await stats(subRos)).publishers;

        const sub = new Topic({ ros: subRos, name, messageType: STRING });
        const got = collector();
        sub.subscribe(got);
        await stats(subRos);

        const a = new Topic({ ros, name, messageType: STRING });
        const b = new Topic({ ros, name, messageType: STRING });
        a.advertise();
        b.advertise();
        await stats(ros);
        assert.equal((await stats(subRos)).publishers, base + 1);

        a.unadvertise(); // with a's advertise id
        await stats(ros);
        assert.equal((await stats(subRos)).publishers, base + 1, "b's advertisement must remain");
        b.publish({ data: "from b" });
        await got.waitFor(1);
        assert.equal(got.messages[0].data, "from b");

        b.unadvertise();
        await stats(ros);
        assert.equal((await stats(subRos)).publishers, base);
      });
    } else {
      // The NDJSON TCP port follows the strict protocol: one registration
      // per connection and topic, whatever the ids. These tests pin that
      // documented behaviour as roslib experiences it.
      test("strict protocol: one Topic's unsubscribe withdraws the connection's subscription", async () => {
        session = new Session(transport);
        const ros = await session.connect();
        const pubRos = await session.connect();
        const name = unique(transport, "unsub");
        const base = (await stats(pubRos)).subscriptions;
        const a = new Topic({ ros, name, messageType: STRING });
        const b = new Topic({ ros, name, messageType: STRING });
        const gotB = collector();
        a.subscribe(() => {});
        b.subscribe(gotB);
        await stats(ros);
        assert.equal((await stats(pubRos)).subscriptions, base + 1);
        const publisher = new Topic({ ros: pubRos, name, messageType: STRING });
        publisher.publish({ data: "before" });
        await gotB.waitFor(1);

        a.unsubscribe();
        await stats(ros);
        assert.equal((await stats(pubRos)).subscriptions, base);
        publisher.publish({ data: "after-a" });
        await stats(pubRos);
        await stats(ros);
        await sleep(100);
        assert.equal(gotB.messages.length, 1, "per-connection registration: nothing after any unsubscribe");

        b.unsubscribe(); // repeated unsubscribe is harmless
        await stats(ros);
        assert.equal((await stats(pubRos)).subscriptions, base);
      });

      test("strict protocol: one Topic's unadvertise withdraws the connection's advertisement", async () => {
        session = new Session(transport);
        const ros = await session.connect();
        const subRos = await session.connect();
        const name = unique(transport, "unadv");
        const base = (await stats(subRos)).publishers;
        const sub = new Topic({ ros: subRos, name, messageType: STRING });
        const got = collector();
        sub.subscribe(got);
        await stats(subRos);

        const a = new Topic({ ros, name, messageType: STRING });
        const b = new Topic({ ros, name, messageType: STRING });
        a.advertise();
        b.advertise();
        await stats(ros);
        assert.equal((await stats(subRos)).publishers, base + 1);
        a.unadvertise();
        await stats(ros);
        assert.equal((await stats(subRos)).publishers, base);
        // Advertising is bookkeeping only: publishing still works.
        b.publish({ data: "from b" });
        await got.waitFor(1);
        assert.equal(got.messages[0].data, "from b");
        b.unadvertise();
        await stats(ros);
        assert.equal((await stats(subRos)).publishers, base);
      });
    }

    test("messages cross connections in order with payloads intact", async () => {
      session = new Session(transport);
      const pubRos = await session.connect();
      const subRos = await session.connect();
      const name = unique(transport, "order");
      const sub = new Topic({ ros: subRos, name, messageType: "any/Any" });
      const got = collector();
      sub.subscribe(got);
      await stats(subRos);

      const publisher = new Topic({ ros: pubRos, name, messageType: "any/Any" });
      const N = 300;
      const big = "x".repeat(64 * 1024);
      for (let i = 0; i < N; i++) {
        publisher.publish({
          seq: i,
          text: "h\u00e9llo \u{1F916} \"quoted\" \\ \n",
          nested: { list: [1, 2.5, -3, null, true], empty: {} },
          big: i % 100 === 0 ? big : "",
        });
      }
      await got.waitFor(N, 15000);
      got.messages.forEach((m, i) => {
        assert.equal(m.seq, i);
        assert.equal(m.text, "h\u00e9llo \u{1F916} \"quoted\" \\ \n");
        assert.deepEqual(m.nested, { list: [1, 2.5, -3, null, true], empty: {} });
        assert.equal(m.big.length, i % 100 === 0 ? big.length : 0);
      });
    });

    test("a connection subscribed to its own topic receives its own messages", async () => {
      session = new Session(transport);
      const ros = await session.connect();
      const name = unique(transport, "self");
      const topic = new Topic({ ros, name, messageType: STRING });
      const got = collector();
      topic.subscribe(got);
      await stats(ros);
      topic.publish({ data: "echo" });
      await got.waitFor(1);
      assert.equal(got.messages[0].data, "echo");
    });
  });
}
