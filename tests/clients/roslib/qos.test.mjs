// QoS options of roslib 2.x Topics against rosgate (docs/protocol.md,
// "QoS"), over both transports:
// - `latch: true` on the publishing Topic: a later subscriber gets the last
//   message at once, then live ones;
// - `throttle_rate` on subscribe: the first message at once, the interval's
//   newest at its end, the ones between skipped;
// - `queue_length` on subscribe: a subscriber that stops reading keeps only
//   the newest N waiting at the gateway; older ones are dropped and counted.
// Time bounds are generous; waits poll with deadlines.

import { describe, test, afterEach } from "node:test";
import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import { Topic } from "roslib";
import { TRANSPORTS, Session, call, collector, stats, unique, withTimeout } from "./harness.mjs";

const STRING = "std_msgs/String";

for (const transport of TRANSPORTS) {
  describe(`qos over ${transport.name}`, () => {
    let session;
    afterEach(async () => {
      await session?.closeAll();
      session = undefined;
    });

    test("latch: a later subscriber gets the last message, then live ones", async () => {
      session = new Session(transport);
      const pubRos = await session.connect();
      const name = unique(transport, "latch");
      const talker = new Topic({ ros: pubRos, name, messageType: STRING, latch: true });
      talker.advertise();
      talker.publish({ data: "first" });
      talker.publish({ data: "last" });
      await stats(pubRos);

      const subRos = await session.connect();
      const got = collector();
      new Topic({ ros: subRos, name, messageType: STRING }).subscribe(got);
      await got.waitFor(1);
      await stats(subRos); // anything else latched would have come before
      assert.deepEqual(got.messages.map((m) => m.data), ["last"]);
      talker.publish({ data: "live" });
      await got.waitFor(2);
      assert.equal(got.messages[1].data, "live");

      // Without latch a later subscriber gets nothing old.
      const plain = unique(transport, "nolatch");
      const t = new Topic({ ros: pubRos, name: plain, messageType: STRING });
      t.publish({ data: "old" });
      await stats(pubRos);
      const late = collector();
      new Topic({ ros: subRos, name: plain, messageType: STRING }).subscribe(late);
      await stats(subRos);
      assert.equal(late.messages.length, 0);
    });

    test("throttle_rate: the first at once, then the interval's newest by its end", async () => {
      session = new Session(transport);
      const subRos = await session.connect();
      const pubRos = await session.connect();
      const name = unique(transport, "throttle");
      const got = collector();
      const times = [];
      const sub = new Topic({ ros: subRos, name, messageType: STRING, throttle_rate: 500 });
      sub.subscribe((m) => {
        times.push(performance.now());
        got(m);
      });
      await stats(subRos);
      const info = await call(subRos, "/rosgate/topic_info", { topic: name });
      assert.deepEqual(info.subscribers.map((s) => s.throttle_ms), [500]);

      const talker = new Topic({ ros: pubRos, name, messageType: STRING });
      const t0 = performance.now();
      talker.publish({ data: "0" });
      await got.waitFor(1);
      for (let i = 1; i < 10; i++) talker.publish({ data: String(i) });
      await stats(pubRos);
      await got.waitFor(2);
      assert.deepEqual(got.messages.map((m) => m.data), ["0", "9"]);
      const second = times[1] - t0;
      assert.ok(second >= 450 && second < 3000, `the newest by the interval's end, not after ${second} ms`);
      await stats(subRos);
      assert.equal(got.messages.length, 2, "one per interval");
    });

    test("queue_length: a subscriber that stops reading keeps the newest", async () => {
      // 1500 x 40 KB = 60 MB: many times what the socket buffers hold.
      const M = 1500;
      const DEPTH = 3;
      session = new Session(transport);
      const subRos = await session.connect();
      const pubRos = await session.connect();
      const name = unique(transport, "queue_length");
      const seqs = [];
      let last;
      const done = new Promise((resolve) => (last = resolve));
      const sub = new Topic({ ros: subRos, name, messageType: "test/Pad", queue_length: DEPTH });
      sub.subscribe((m) => {
        seqs.push(m.seq);
        if (m.seq === M - 1) last();
      });
      await stats(subRos);
      const info = await call(subRos, "/rosgate/topic_info", { topic: name });
      assert.deepEqual(info.subscribers.map((s) => s.qos.depth), [DEPTH]);

      const before = await stats(pubRos);
      transport.pause(subRos);
      const talker = new Topic({ ros: pubRos, name, messageType: "test/Pad" });
      const pad = "p".repeat(40_000);
      for (let i = 0; i < M; i++) talker.publish({ seq: i, pad });
      const during = await withTimeout(call(pubRos, "/rosgate/stats"), 30_000, "stats after the flood");
      transport.resume(subRos);
      await withTimeout(done, 30_000, "the newest message");
      await stats(subRos);
      const after = await stats(pubRos);

      assert.ok(seqs.every((s, i) => i === 0 || seqs[i - 1] < s), "in order, each once");
      assert.ok(during.depth_dropped > before.depth_dropped, "drops while it did not read");
      assert.equal(after.depth_dropped - before.depth_dropped, M - seqs.length, "every message received or counted");
      assert.ok(seqs.length < M / 2, `most were dropped: ${seqs.length} received`);
      // What waited at the gateway: the newest DEPTH, or the newest DEPTH - 1
      // behind a message it had partly written when the socket filled.
      assert.deepEqual(seqs.slice(-(DEPTH - 1)), [M - 2, M - 1]);
    });
  });
}
