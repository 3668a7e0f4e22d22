// Parameters through roslib 2.x (docs/protocol.md, "Parameters"):
// ROSLIB.Param's get/set/delete (rosapi get_param/set_param/delete_param)
// on parameters the gateway holds, global and `node:param`, and
// ros.getParams(); then a roslib client setting a parameter of a node whose
// owner validates the change (a raw NDJSON TCP client, or a roslib client
// answering <node>/validate_parameters with a ROSLIB.Service): accepted,
// and rejected with the owner's reason reaching Param.set's failed
// callback.

import net from "node:net";
import { describe, test, afterEach } from "node:test";
import assert from "node:assert/strict";
import { once } from "node:events";
import { Param, Service, Topic } from "roslib";
import { TRANSPORTS, Session, collector, stats, withTimeout } from "./harness.mjs";

const TCP_ADDR = process.env.ROSGATE_TCP_ADDR;

/** A roslib callback-style call as a promise (rejects with the reason). */
function api(what, start) {
  const done = new Promise((resolve, reject) => start(resolve, (reason) => reject(new Refused(reason))));
  return withTimeout(done, 5000, what);
}

class Refused extends Error {
  constructor(reason) {
    super(typeof reason === "string" ? reason : JSON.stringify(reason));
    this.reason = reason;
  }
}

const get = (param) => api(`get ${param.name}`, (ok, fail) => param.get(ok, fail));
const set = (param, value) => api(`set ${param.name}`, (ok, fail) => param.set(value, ok, fail));
const del = (param) => api(`delete ${param.name}`, (ok, fail) => param.delete(ok, fail));
const getParams = (ros) => api("getParams", (ok, fail) => ros.getParams(ok, fail));

async function refusal(promise, what) {
  try {
    const value = await promise;
    assert.fail(`${what}: expected a refusal, got ${JSON.stringify(value)}`);
  } catch (err) {
    if (!(err instanceof Refused)) throw err;
    return String(err.reason);
  }
}

let counter = 0;
/** A node or parameter name no other test uses (one ROS 2 token). */
function token(transport, base) {
  counter += 1;
  return `${base}_${transport.name.replace(/-/g, "_")}_${process.pid}_${counter}`;
}

/**
 * An op of rosgate's own (declare_node, declare_parameter...) sent on a
 * roslib connection; resolves with its info status. The connection must
 * receive info statuses (see `allStatuses`).
 */
let ops = 0;
async function op(ros, message) {
  ops += 1;
  const id = `op:${process.pid}:${ops}`;
  const status = withTimeout(once(ros, `status:${id}`), 5000, `${message.op} status`);
  ros.callOnConnection({ ...message, id });
  const [answer] = await status;
  assert.equal(answer.level, "info", JSON.stringify(answer));
  return answer;
}

/** WebSocket connections start with warnings only: ask for every status. */
function allStatuses(ros) {
  ros.callOnConnection({ op: "set_level", level: "info" });
}

/** A raw NDJSON client on rosgate's TCP port: one JSON object per line. */
class RawTcp {
  #socket;
  #buffer = "";
  #lines = [];
  #waiters = [];
  #closed = false;

  static async connect() {
    const [host, port] = TCP_ADDR.split(":");
    const raw = new RawTcp(net.connect({ host, port: Number(port) }));
    await withTimeout(once(raw.#socket, "connect"), 5000, "raw TCP connect");
    return raw;
  }

  constructor(socket) {
    this.#socket = socket;
    socket.setEncoding("utf8");
    socket.on("data", (chunk) => {
      this.#buffer += chunk;
      let nl;
      while ((nl = this.#buffer.indexOf("\n")) >= 0) {
        this.#lines.push(JSON.parse(this.#buffer.slice(0, nl)));
        this.#buffer = this.#buffer.slice(nl + 1);
      }
      for (const w of this.#waiters.splice(0)) w();
    });
    socket.on("error", () => {});
    socket.on("close", () => {
      this.#closed = true;
      for (const w of this.#waiters.splice(0)) w();
    });
  }

  send(message) {
    this.#socket.write(JSON.stringify(message) + "\n");
  }

  /** The next message matching `pred` (others are skipped). */
  async next(pred, ms = 5000) {
    const deadline = Date.now() + ms;
    for (;;) {
      const at = this.#lines.findIndex(pred);
      if (at >= 0) return this.#lines.splice(0, at + 1).pop();
      if (this.#closed) throw new Error("raw TCP: connection closed");
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`raw TCP: no matching message within ${ms} ms`);
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Sends `message` with an id; resolves with the status answering it. */
  async request(message) {
    ops += 1;
    const id = `raw:${process.pid}:${ops}`;
    this.send({ ...message, id });
    const answer = await this.next((m) => m.id === id);
    assert.equal(answer.level, "info", JSON.stringify(answer));
    return answer;
  }

  close() {
    const closed = once(this.#socket, "close");
    this.#socket.end();
    return withTimeout(closed, 5000, "raw TCP close");
  }
}

/** A roslib connection that owns node `name` (declared by the WebSocket URL or by declare_node). */
async function roslibOwner(session, transport, name) {
  let ros;
  if (transport.name === "websocket") {
    ros = await session.connect(`${transport.url}/?node=${name}`);
    allStatuses(ros);
  } else {
    ros = await session.connect();
    await op(ros, { op: "declare_node", name });
  }
  return ros;
}

for (const transport of TRANSPORTS) {
  describe(`parameters over ${transport.name}`, () => {
    let session;
    afterEach(async () => {
      await session?.closeAll();
      session = undefined;
    });

    test("Param get/set/delete of a global parameter the gateway holds", async () => {
      session = new Session(transport);
      const ros = await session.connect();
      const other = await session.connect();
      const name = token(transport, "test_param");
      const param = new Param({ ros, name });
      assert.equal(await get(param), null, "unset reads as null");

      for (const value of ["test_value", 42, 2.5, true, [1, 2, 3], ["a", "b"], [0.5, 1]]) {
        await set(param, value);
        assert.deepEqual(await get(param), value);
        // Seen from another connection too.
        assert.deepEqual(await get(new Param({ ros: other, name })), value);
      }
      assert.ok((await getParams(other)).includes(name));

      // Not a parameter value: refused, the old value stays.
      const why = await refusal(set(param, { nested: 1 }), "object value");
      assert.match(why, /object/);
      assert.deepEqual(await get(param), [0.5, 1]);

      await del(param);
      assert.equal(await get(param), null);
      assert.ok(!(await getParams(ros)).includes(name));
      // Deleting again is harmless.
      await del(param);
    });

    test("Param with node:name is a parameter of that (ownerless) node", async () => {
      session = new Session(transport);
      const ros = await session.connect();
      const node = token(transport, "free");
      const param = new Param({ ros, name: `${node}:speed` });
      await set(param, 3);
      assert.equal(await get(param), 3);
      assert.equal(await get(new Param({ ros, name: `/${node}:speed` })), 3);
      assert.equal(await get(new Param({ ros, name: "speed" })), null, "the plain name is another parameter");
      assert.ok((await getParams(ros)).includes(`/${node}:speed`));
      // The node's parameter services answer for it.
      const values = await api("get_parameters", (ok, fail) =>
        new Service({ ros, name: `/${node}/get_parameters`, serviceType: "rcl_interfaces/srv/GetParameters" })
          .callService({ names: ["speed"] }, ok, fail),
      );
      assert.equal(values.values[0].type, 2);
      assert.equal(values.values[0].integer_value, 3);
      await del(param);
      assert.equal(await get(param), null);
    });

    test("/parameter_events reports changes to a roslib subscriber", async () => {
      session = new Session(transport);
      const ros = await session.connect();
      const watcher = await session.connect();
      const events = collector();
      new Topic({ ros: watcher, name: "/parameter_events", messageType: "rcl_interfaces/msg/ParameterEvent" })
        .subscribe(events);
      await stats(watcher);
      const name = token(transport, "watched");
      const param = new Param({ ros, name });
      await set(param, "a");
      await set(param, "b");
      await del(param);
      const mine = (e) =>
        [...e.new_parameters, ...e.changed_parameters, ...e.deleted_parameters].some((p) => p.name === name);
      let got = [];
      for (let n = 3; got.length < 3; n += 1) got = (await events.waitFor(n)).filter(mine);
      assert.equal(got.length, 3, JSON.stringify(got));
      assert.equal(got[0].node, "");
      assert.equal(got[0].new_parameters[0].value.string_value, "a");
      assert.equal(got[1].changed_parameters[0].value.string_value, "b");
      assert.equal(got[2].deleted_parameters[0].value.type, 0);
    });

    for (const ownerKind of ["a raw TCP client", "a roslib client"]) {
      test(`setting a parameter validated by its owner, ${ownerKind}: accepted, then rejected with the reason`, async () => {
        session = new Session(transport);
        const node = token(transport, "controller");
        let raw;
        let answers; // what the owner answers next: [successful, reason]
        const seen = [];
        if (ownerKind === "a raw TCP client") {
          raw = await RawTcp.connect();
          await raw.request({ op: "declare_node", name: node });
          await raw.request({
            op: "declare_parameter",
            name: "max_vel",
            value: 0.5,
            descriptor: { floating_point_range: { from_value: 0.0, to_value: 2.0 } },
            validate: true,
          });
          // Answers each validation as told.
          (async () => {
            for (;;) {
              let call;
              try {
                call = await raw.next((m) => m.op === "call_service", 60000);
              } catch {
                return;
              }
              seen.push(call.args);
              const [successful, reason] = answers;
              raw.send({ op: "service_response", service: call.service, id: call.id, values: { successful, reason }, result: true });
            }
          })();
        } else {
          const owner = await roslibOwner(session, transport, node);
          await op(owner, {
            op: "declare_parameter",
            name: "max_vel",
            value: 0.5,
            descriptor: { floating_point_range: { from_value: 0.0, to_value: 2.0 } },
            validate: true,
          });
          const validator = new Service({
            ros: owner,
            name: `/${node}/validate_parameters`,
            serviceType: "rcl_interfaces/srv/SetParameters",
          });
          await validator.advertise((request, response) => {
            seen.push(request);
            [response.successful, response.reason] = answers;
            return true;
          });
          await stats(owner);
        }
        try {
          const ros = await session.connect();
          const param = new Param({ ros, name: `${node}:max_vel` });
          assert.equal(await get(param), 0.5);

          answers = [true, ""];
          await set(param, 1.2);
          assert.equal(await get(param), 1.2);
          assert.deepEqual(seen.at(-1), {
            node: `/${node}`,
            parameters: [{ name: "max_vel", value: 1.2, type: "double" }],
          });

          answers = [false, "too fast near people"];
          const why = await refusal(set(param, 1.9), "rejected by the owner");
          assert.match(why, /too fast near people/);
          assert.equal(await get(param), 1.2, "the old value stays");
          assert.equal(seen.length, 2);

          // The rules refuse before the owner is asked.
          // (5.5, not 5.0: JSON.stringify(5.0) is "5", an integer, which
          // a double parameter refuses as a type change, as in ROS 2.)
          const range = await refusal(set(param, 5.5), "out of range");
          assert.match(range, /range/);
          const type = await refusal(set(param, "fast"), "type change");
          assert.match(type, /type/);
          assert.equal(seen.length, 2, "the owner saw only what the rules allowed");
          assert.equal(await get(param), 1.2);

          // An owned parameter is only undeclared by its owner.
          const del1 = await refusal(del(param), "delete of an owned parameter");
          assert.match(del1, /owner/);
          // An undeclared parameter of the owned node cannot be created.
          const undeclared = await refusal(set(new Param({ ros, name: `${node}:other` }), 1), "undeclared");
          assert.match(undeclared, /not declared/);
        } finally {
          await raw?.close();
        }
      });
    }

    test("a validating owner that leaves: the pending set fails at once, its parameters go", async () => {
      session = new Session(transport);
      const node = token(transport, "leaving");
      const owner = await roslibOwner(session, transport, node);
      await op(owner, { op: "declare_parameter", name: "gain", value: 1, validate: true });
      let asked;
      const askedPromise = new Promise((resolve) => (asked = resolve));
      // Never answers: the owner leaves instead.
      await new Service({ ros: owner, name: `/${node}/validate_parameters`, serviceType: "any/Any" }).advertiseAsync(
        () => {
          asked();
          return new Promise(() => {});
        },
      );
      await stats(owner);
      const ros = await session.connect();
      const param = new Param({ ros, name: `${node}:gain` });
      const pending = refusal(set(param, 2), "owner gone");
      await withTimeout(askedPromise, 5000, "validation call");
      const started = Date.now();
      const closed = withTimeout(once(owner, "close"), 5000, "owner close");
      owner.close();
      await closed;
      session.open.delete(owner);
      assert.match(await pending, /disconnected/);
      assert.ok(Date.now() - started < 3000, "not at the call timeout");
      assert.equal(await get(param), null, "the node's parameters left with it");
    });
  });
}
