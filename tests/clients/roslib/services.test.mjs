// Services through roslib 2.x: advertise + call (success and failure),
// unadvertise, and many concurrent calls.

import { describe, test, afterEach } from "node:test";
import assert from "node:assert/strict";
import { Service } from "roslib";
import { TRANSPORTS, Session, ServiceFailure, call, stats, unique, withTimeout } from "./harness.mjs";

const ADD = "rospy_tutorials/AddTwoInts";

async function expectFailure(promise, what) {
  try {
    const values = await promise;
    assert.fail(`${what}: expected a failure, got ${JSON.stringify(values)}`);
  } catch (err) {
    if (!(err instanceof ServiceFailure)) throw err;
    return err.reason;
  }
}

for (const transport of TRANSPORTS) {
  describe(`services over ${transport.name}`, () => {
    let session;
    afterEach(async () => {
      await session?.closeAll();
      session = undefined;
    });

    test("advertise (callback style) and call from another connection", async () => {
      session = new Session(transport);
      const provider = await session.connect();
      const caller = await session.connect();
      const name = unique(transport, "add");
      const server = new Service({ ros: provider, name, serviceType: ADD });
      const seen = [];
      await server.advertise((request, response) => {
        seen.push(request);
        response.sum = request.a + request.b;
        return true;
      });
      await stats(provider);

      const values = await withTimeout(call(caller, name, { a: 2, b: 40 }), 5000, "call");
      assert.deepEqual(values, { sum: 42 });
      assert.deepEqual(seen, [{ a: 2, b: 40 }]);
    });

    test("advertiseAsync and call on the same connection", async () => {
      session = new Session(transport);
      const ros = await session.connect();
      const name = unique(transport, "async");
      const server = new Service({ ros, name, serviceType: ADD });
      await server.advertiseAsync(async ({ a, b }) => ({ sum: a + b, note: "\u00e9\u{1F916}" }));
      await stats(ros);
      const values = await withTimeout(call(ros, name, { a: 1, b: 2 }), 5000, "call");
      assert.deepEqual(values, { sum: 3, note: "\u00e9\u{1F916}" });
    });

    test("calling a service nobody provides fails at once with a reason", async () => {
      session = new Session(transport);
      const ros = await session.connect();
      const name = unique(transport, "nobody");
      const started = Date.now();
      const reason = await withTimeout(expectFailure(call(ros, name, {}), "no provider"), 3000, "failure");
      assert.equal(typeof reason, "string");
      assert.match(reason, new RegExp(name.replace(/[/]/g, "\\/")));
      assert.ok(Date.now() - started < 2000, "failure should not wait for a timeout");
    });

    test("a provider that throws (advertiseAsync) fails the call with its message", async () => {
      session = new Session(transport);
      const provider = await session.connect();
      const caller = await session.connect();
      const name = unique(transport, "throws");
      const server = new Service({ ros: provider, name, serviceType: ADD });
      await server.advertiseAsync(async () => {
        throw new Error("refused on purpose");
      });
      await stats(provider);
      const reason = await withTimeout(expectFailure(call(caller, name, { a: 1, b: 1 }), "throws"), 5000, "failure");
      assert.match(String(reason), /refused on purpose/);
    });

    test("a provider callback returning false fails the call (bounded by the call's timeout)", async () => {
      // roslib sends {"op":"service_response","result":false,"id":...}
      // without `values` here. rosgate refuses that response (values is
      // required), so the call ends by its own 1 s timeout rather than at
      // once; either way the caller sees a failure, never a success.
      session = new Session(transport);
      const provider = await session.connect();
      const caller = await session.connect();
      const name = unique(transport, "false");
      const server = new Service({ ros: provider, name, serviceType: ADD });
      await server.advertise(() => false);
      await stats(provider);
      await withTimeout(expectFailure(call(caller, name, { a: 1, b: 1 }, 1), "returns false"), 4000, "failure");
    });

    test("unadvertise: later calls fail at once", async () => {
      session = new Session(transport);
      const provider = await session.connect();
      const caller = await session.connect();
      const name = unique(transport, "unadv");
      const server = new Service({ ros: provider, name, serviceType: ADD });
      await server.advertiseAsync(async ({ a, b }) => ({ sum: a + b }));
      await stats(provider);
      assert.deepEqual(await call(caller, name, { a: 1, b: 1 }), { sum: 2 });

      await server.unadvertise();
      await stats(provider);
      const started = Date.now();
      await withTimeout(expectFailure(call(caller, name, { a: 1, b: 1 }), "unadvertised"), 3000, "failure");
      assert.ok(Date.now() - started < 2000);
    });

    test("400 concurrent calls from two connections each get their own answer", async () => {
      session = new Session(transport);
      const provider = await session.connect();
      const callers = [await session.connect(), await session.connect()];
      const name = unique(transport, "many");
      const server = new Service({ ros: provider, name, serviceType: ADD });
      await server.advertiseAsync(async ({ a, b }) => {
        // Answer out of order: later requests may finish first.
        if (a % 3 === 0) await new Promise((r) => setImmediate(r));
        return { sum: a * 1000 + b };
      });
      await stats(provider);

      const calls = [];
      for (let i = 0; i < 400; i++) {
        const ros = callers[i % 2];
        calls.push(call(ros, name, { a: i, b: i % 2 }).then((v) => [i, v]));
      }
      const results = await withTimeout(Promise.all(calls), 20000, "400 calls");
      for (const [i, values] of results) assert.deepEqual(values, { sum: i * 1000 + (i % 2) });
      const after = await stats(callers[0]);
      assert.equal(after.calls_pending, 0);
    });
  });
}
