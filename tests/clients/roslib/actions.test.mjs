// ROS 2 actions through roslib 2.x's Action (rosbridge v2's action ops):
// roslib's action client (sendGoal, cancelGoal, cancelAllGoals) against
// roslib's own action server (advertise, sendFeedback, setSucceeded,
// setCanceled, setFailed, unadvertise) on another connection, through
// rosgate, on both transports.
//
// roslib's Action.advertise: in earlier roslibjs sources,
// advertise's goal handler only evaluated `this.#executeAction.bind(this)`
// without calling it, so the action callback never fired. That is fixed in the roslib 2.1.0 these
// tests install (dist/RosLib.js calls the handler), and the first test
// checks that the server's callback does receive the goal and its id.
//
// What roslib 2.1.0's sendGoal does with results: `result: true` with
// status 4 (SUCCEEDED) calls the result callback with `values`; any other
// status, and any `result: false`, calls the failed callback with a string
// "<what happened>: <values>" ("Action was canceled: ...", "Action was
// aborted: ...", "Action status unknown: ..." for status 0), prefixed
// "GoalError: ".
//
// Two roslib helpers send what only the rosbridge dialect (WebSocket)
// accepts; rosgate's TCP port speaks the strict protocol and refuses them
// with an error status, as docs/protocol.md documents ("Compatibility with
// rosbridge v2"): `cancelAllGoals` sends `call_service` without an `id`, and
// `setFailed` sends `action_result` without `values`. Those two tests check
// the refusal on TCP, and the same gateway behaviour with a complete
// message.

import { describe, test, afterEach } from "node:test";
import assert from "node:assert/strict";
import { once } from "node:events";
import { Action } from "roslib";
import { TRANSPORTS, Session, call, stats, unique, withTimeout, sleep } from "./harness.mjs";

const FIBONACCI = "example_interfaces/action/Fibonacci";

/**
 * roslib's sendGoal as a promise: resolves with `{ ok: true, values }` from
 * the result callback or `{ ok: false, reason }` from the failed callback;
 * `feedback` collects the feedback values. `id` is the goal id roslib made.
 */
function sendGoal(client, goal) {
  const feedback = [];
  const waiters = [];
  let id;
  const done = new Promise((resolve) => {
    id = client.sendGoal(
      goal,
      (values) => resolve({ ok: true, values }),
      (values) => {
        feedback.push(values);
        for (const w of waiters.splice(0)) w();
      },
      (reason) => resolve({ ok: false, reason }),
    );
  });
  return {
    id,
    done: (ms = 5000) => withTimeout(done, ms, `result of goal ${id}`),
    feedback,
    /** Resolves once `n` feedback messages have arrived. */
    async feedbackCount(n, ms = 5000) {
      const deadline = Date.now() + ms;
      while (feedback.length < n) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`expected ${n} feedback messages, got ${feedback.length}`);
        await new Promise((resolve) => {
          const timer = setTimeout(resolve, left);
          waiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
    },
  };
}

/**
 * A Fibonacci server with roslib's Action.advertise, tutorial semantics
 * with a short step: [0, 1] plus `order - 1` steps, feedback each step,
 * cancel checked each step (then setCanceled with an empty sequence),
 * setSucceeded at the end. `goals` records what its callback received;
 * `canceled` the ids its cancel callback received.
 */
function fibonacciServer(ros, name, { stepMs = 5 } = {}) {
  const server = new Action({ ros, name, actionType: FIBONACCI });
  const goals = [];
  const canceled = new Set();
  server.advertise(
    async (goal, id) => {
      goals.push({ goal, id });
      const sequence = [0, 1];
      for (let i = 1; i < goal.order; i++) {
        if (canceled.has(id)) {
          server.setCanceled(id, { sequence: [] });
          return;
        }
        sequence.push(sequence[i] + sequence[i - 1]);
        server.sendFeedback(id, { sequence: [...sequence] });
        await sleep(stepMs);
      }
      server.setSucceeded(id, { sequence });
    },
    (id) => canceled.add(id),
  );
  return { server, goals, canceled };
}

for (const transport of TRANSPORTS) {
  const rosbridgeDialect = transport.name === "websocket";
  describe(`actions over ${transport.name}`, () => {
    let session;
    afterEach(async () => {
      await session?.closeAll();
      session = undefined;
    });

    test("sendGoal with feedback to roslib's own action server (advertise, sendFeedback, setSucceeded)", async () => {
      session = new Session(transport);
      const provider = await session.connect();
      const caller = await session.connect();
      const name = unique(transport, "fibonacci");
      const seenByServer = [];
      provider.on(name, (msg) => seenByServer.push(msg)); // roslib routes send_action_goal by action name
      const { goals } = fibonacciServer(provider, name);
      await stats(provider);

      const client = new Action({ ros: caller, name, actionType: FIBONACCI });
      const goal = sendGoal(client, { order: 5 });
      const outcome = await goal.done();
      assert.deepEqual(outcome, { ok: true, values: { sequence: [0, 1, 1, 2, 3, 5] } });
      assert.deepEqual(goal.feedback, [
        { sequence: [0, 1, 1] },
        { sequence: [0, 1, 1, 2] },
        { sequence: [0, 1, 1, 2, 3] },
        { sequence: [0, 1, 1, 2, 3, 5] },
      ]);

      // The server's action callback fired (roslib 2.1.0's advertise works)
      // with the goal and a gateway-made id, not the caller's.
      assert.equal(goals.length, 1);
      assert.deepEqual(goals[0].goal, { order: 5 });
      assert.equal(typeof goals[0].id, "string");
      assert.notEqual(goals[0].id, goal.id);
      assert.equal(seenByServer.length, 1);
      assert.equal(seenByServer[0].op, "send_action_goal");
      assert.equal(seenByServer[0].action, name);
      assert.equal(seenByServer[0].action_type, FIBONACCI);
      assert.equal(seenByServer[0].feedback, true);

      const after = await stats(caller);
      assert.equal(after.goals_pending, 0);
    });

    test("cancelGoal: the server's cancel callback fires and setCanceled reaches the failed callback", async () => {
      session = new Session(transport);
      const provider = await session.connect();
      const caller = await session.connect();
      const name = unique(transport, "cancel");
      const { goals, canceled } = fibonacciServer(provider, name, { stepMs: 100 });
      await stats(provider);

      const client = new Action({ ros: caller, name, actionType: FIBONACCI });
      const goal = sendGoal(client, { order: 60 });
      await goal.feedbackCount(2);
      client.cancelGoal(goal.id);
      const outcome = await goal.done();
      assert.equal(outcome.ok, false, `expected a cancel, got ${JSON.stringify(outcome)}`);
      assert.match(outcome.reason, /^GoalError: Action was canceled/);
      assert.match(outcome.reason, /"sequence":\[\]/);
      assert.deepEqual([...canceled], [goals[0].id]);
      const n = goal.feedback.length;
      await sleep(250);
      assert.equal(goal.feedback.length, n, "no feedback after the result");
    });

    test("cancelAllGoals cancels every goal of this caller for that action, not another caller's", async () => {
      session = new Session(transport);
      const provider = await session.connect();
      const caller = await session.connect();
      const other = await session.connect();
      const name = unique(transport, "cancel_all");
      const { canceled } = fibonacciServer(provider, name, { stepMs: 50 });
      await stats(provider);

      const client = new Action({ ros: caller, name, actionType: FIBONACCI });
      const mine = [sendGoal(client, { order: 60 }), sendGoal(client, { order: 60 })];
      const theirs = sendGoal(new Action({ ros: other, name, actionType: FIBONACCI }), { order: 8 });
      for (const g of mine) await g.feedbackCount(1);
      await theirs.feedbackCount(1);
      if (rosbridgeDialect) {
        // The response has no id (roslib sent none): roslib logs "Received
        // service response without ID" and carries on.
        client.cancelAllGoals();
      } else {
        // Refused on the strict TCP port: call_service needs an id...
        const refused = withTimeout(once(caller, "status"), 5000, "status for cancelAllGoals");
        client.cancelAllGoals();
        const [status] = await refused;
        assert.equal(status.level, "error");
        assert.match(status.msg, /"id" is required/);
        // ...so the same service, called with one (what a ROS 2 client calls).
        const values = await withTimeout(call(caller, `${name}/_action/cancel_goal`), 5000, "cancel_goal");
        assert.deepEqual(values, { return_code: 0, goals_canceling: [], canceled: 2 });
      }
      for (const g of mine) {
        const outcome = await g.done();
        assert.equal(outcome.ok, false);
        assert.match(outcome.reason, /^GoalError: Action was canceled/);
      }
      assert.equal(canceled.size, 2);
      assert.deepEqual(await theirs.done(), { ok: true, values: { sequence: [0, 1, 1, 2, 3, 5, 8, 13, 21] } });
    });

    test("a goal to an action nobody serves fails at once through the failed callback", async () => {
      session = new Session(transport);
      const caller = await session.connect();
      const name = unique(transport, "nobody");
      const client = new Action({ ros: caller, name, actionType: FIBONACCI });
      const started = Date.now();
      const outcome = await sendGoal(client, { order: 3 }).done(3000);
      assert.equal(outcome.ok, false);
      // status 0 (UNKNOWN) and the gateway's reason, which names the action
      assert.match(outcome.reason, /^GoalError: Action status unknown/);
      assert.ok(outcome.reason.includes(name), outcome.reason);
      assert.ok(Date.now() - started < 2000, "failure should not wait for a timeout");
    });

    test("setFailed on the server reaches the caller's failed callback (aborted)", async () => {
      session = new Session(transport);
      const provider = await session.connect();
      const caller = await session.connect();
      const name = unique(transport, "fails");
      const server = new Action({ ros: provider, name, actionType: FIBONACCI });
      server.advertise((goal, id) => {
        server.setFailed(id);
      });
      await stats(provider);
      const client = new Action({ ros: caller, name, actionType: FIBONACCI });
      const outcome = await sendGoal(client, { order: 3 }).done();
      assert.equal(outcome.ok, false);
      // roslib's setFailed sends no values; rosgate supplies a reason (on
      // both transports: `values` is optional in an action_result).
      assert.match(outcome.reason, /^GoalError: Action was aborted: the action server reported a failure/);
    });

    test("the server disconnecting fails its goals in flight (aborted)", async () => {
      session = new Session(transport);
      const provider = await session.connect();
      const caller = await session.connect();
      const name = unique(transport, "server_gone");
      fibonacciServer(provider, name, { stepMs: 100 });
      await stats(provider);
      const client = new Action({ ros: caller, name, actionType: FIBONACCI });
      const goal = sendGoal(client, { order: 60 });
      await goal.feedbackCount(1);
      transport.drop(provider);
      const outcome = await goal.done();
      assert.equal(outcome.ok, false);
      assert.match(outcome.reason, /^GoalError: Action was aborted/);
      assert.match(outcome.reason, /disconnected/);
    });

    test("unadvertise: goals in flight are aborted and later goals fail at once", async () => {
      session = new Session(transport);
      const provider = await session.connect();
      const caller = await session.connect();
      const name = unique(transport, "unadv");
      const { server } = fibonacciServer(provider, name, { stepMs: 100 });
      await stats(provider);
      const client = new Action({ ros: caller, name, actionType: FIBONACCI });
      const inFlight = sendGoal(client, { order: 60 });
      await inFlight.feedbackCount(1);

      server.unadvertise();
      await stats(provider);
      const first = await inFlight.done();
      assert.equal(first.ok, false);
      assert.match(first.reason, /^GoalError: Action was aborted/);
      const started = Date.now();
      const later = await sendGoal(client, { order: 3 }).done(3000);
      assert.equal(later.ok, false);
      assert.match(later.reason, /^GoalError: Action status unknown/);
      assert.ok(Date.now() - started < 2000);
    });

    test("100 concurrent goals from two callers each get their own feedback and result", async () => {
      session = new Session(transport);
      const provider = await session.connect();
      const callers = [await session.connect(), await session.connect()];
      const name = unique(transport, "many");
      fibonacciServer(provider, name, { stepMs: 1 });
      await stats(provider);
      const clients = callers.map((ros) => new Action({ ros, name, actionType: FIBONACCI }));
      const fib = (order) => {
        const s = [0, 1];
        for (let i = 1; i < order; i++) s.push(s[i] + s[i - 1]);
        return s;
      };
      const goals = [];
      for (let i = 0; i < 100; i++) {
        const order = 2 + (i % 10);
        goals.push([order, sendGoal(clients[i % 2], { order })]);
      }
      for (const [order, goal] of goals) {
        assert.deepEqual(await goal.done(20000), { ok: true, values: { sequence: fib(order) } });
        assert.equal(goal.feedback.length, order - 1);
        assert.deepEqual(goal.feedback.at(-1), { sequence: fib(order) });
      }
      const after = await stats(callers[0]);
      assert.equal(after.goals_pending, 0);
    });
  });
}
