// @foxglove/ws-protocol's FoxgloveClient (npm 0.8, unchanged) against
// rosgate's Foxglove WebSocket protocol (docs/protocol.md, "Foxglove
// WebSocket protocol"). scripts/clients.sh starts rosgate on ephemeral ports
// and passes ROSGATE_FOXGLOVE_URL (the --foxglove-listen port) and
// ROSGATE_WS_URL (the rosbridge port, where a plain rosbridge client
// publishes, and where a client offering the Foxglove subprotocol is served
// the same protocol). Messages are decoded as the Foxglove app decodes them:
// the channel's ros2msg schema parsed by @foxglove/rosmsg, the CDR read by
// @foxglove/rosmsg2-serialization's MessageReader.

import { test } from "node:test";
import assert from "node:assert/strict";
import wsProtocol from "@foxglove/ws-protocol";
import { parse as parseMessageDefinition } from "@foxglove/rosmsg";
import { MessageReader, MessageWriter } from "@foxglove/rosmsg2-serialization";
import WebSocket from "ws";

// The package is CommonJS: its exports come as one object.
const { FoxgloveClient } = wsProtocol;

const FOXGLOVE_URL = process.env.ROSGATE_FOXGLOVE_URL;
const WS_URL = process.env.ROSGATE_WS_URL;
if (!FOXGLOVE_URL || !WS_URL) {
  throw new Error("ROSGATE_FOXGLOVE_URL / ROSGATE_WS_URL are not set: run through scripts/clients.sh");
}

/** Resolves with the first `event` of `client` that `pred` accepts, or fails after `ms`. */
function next(client, event, pred = () => true, ms = 5000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      client.off(event, on);
      reject(new Error(`no ${event} within ${ms} ms`));
    }, ms);
    const on = (v) => {
      if (!pred(v)) return;
      clearTimeout(timer);
      client.off(event, on);
      resolve(v);
    };
    client.on(event, on);
  });
}

/** A FoxgloveClient over `ws` at `url`, once its serverInfo came. */
async function connect(url = FOXGLOVE_URL) {
  const ws = new WebSocket(url, [FoxgloveClient.SUPPORTED_SUBPROTOCOL]);
  const client = new FoxgloveClient({ ws });
  const info = await next(client, "serverInfo");
  return { client, info };
}

/** A plain rosbridge client on the rosbridge port. */
async function rosbridge() {
  const ws = new WebSocket(WS_URL);
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  return {
    send: (op) => ws.send(JSON.stringify(op)),
    close: () => ws.close(),
  };
}

/** The channel advertised for `topic` (advertise events until it comes). */
async function channelOf(client, topic) {
  const channels = await next(client, "advertise", (chs) => chs.some((c) => c.topic === topic));
  return channels.find((c) => c.topic === topic);
}

test("serverInfo says what rosgate serves", async () => {
  const { client, info } = await connect();
  try {
    assert.equal(info.name, "rosgate");
    assert.deepEqual(info.supportedEncodings, ["cdr", "json"]);
    assert.equal(typeof info.metadata.rosgate_version, "string");
    assert.equal(typeof info.sessionId, "string");
  } finally {
    client.close();
  }
});

test("a rosbridge publisher's JSON arrives as CDR the Foxglove app decodes", async () => {
  const { client } = await connect();
  const pub = await rosbridge();
  try {
    const topic = "/fx_node_chatter";
    pub.send({ op: "advertise", topic, type: "std_msgs/msg/String" });
    const channel = await channelOf(client, topic);
    assert.equal(channel.encoding, "cdr");
    assert.equal(channel.schemaEncoding, "ros2msg");
    assert.equal(channel.schemaName, "std_msgs/msg/String");
    const reader = new MessageReader(parseMessageDefinition(channel.schema, { ros2: true }));
    const sub = client.subscribe(channel.id);
    // Publish until the subscription is in place (the two connections race).
    let n = 0;
    const timer = setInterval(() => pub.send({ op: "publish", topic, msg: { data: `hello ${n++}` } }), 20);
    try {
      const msg = await next(client, "message", (m) => m.subscriptionId === sub);
      const decoded = reader.readMessage(new Uint8Array(msg.data.buffer, msg.data.byteOffset, msg.data.byteLength));
      assert.match(decoded.data, /^hello \d+$/);
      const nowNs = BigInt(Date.now()) * 1000000n;
      assert.ok(msg.timestamp > nowNs - 60_000_000_000n && msg.timestamp <= nowNs + 5_000_000_000n, `log time ${msg.timestamp}`);
    } finally {
      clearInterval(timer);
    }
    // The publisher leaves: its channel goes.
    const gone = next(client, "unadvertise", (ids) => ids.includes(channel.id));
    pub.close();
    await gone;
  } finally {
    client.close();
  }
});

test("a topic of an unknown type is a json channel", async () => {
  const { client } = await connect();
  const pub = await rosbridge();
  try {
    const topic = "/fx_node_unknown";
    pub.send({ op: "advertise", topic, type: "nobody_msgs/msg/Nope" });
    const channel = await channelOf(client, topic);
    assert.equal(channel.encoding, "json");
    const sub = client.subscribe(channel.id);
    const timer = setInterval(() => pub.send({ op: "publish", topic, msg: { x: [1, 2] } }), 20);
    try {
      const msg = await next(client, "message", (m) => m.subscriptionId === sub);
      assert.deepEqual(JSON.parse(new TextDecoder().decode(msg.data)), { x: [1, 2] });
    } finally {
      clearInterval(timer);
    }
  } finally {
    pub.close();
    client.close();
  }
});

test("the rosbridge port serves a client that offers the subprotocol", async () => {
  const { client, info } = await connect(WS_URL);
  try {
    assert.equal(info.name, "rosgate");
  } finally {
    client.close();
  }
});

test("a subscription to no channel is an error status", async () => {
  const { client } = await connect();
  try {
    const status = next(client, "status", (s) => s.level === 2);
    client.subscribe(987654);
    const s = await status;
    assert.match(s.message, /no channel 987654/);
  } finally {
    client.close();
  }
});

test("clientPublish: CDR from a MessageWriter reaches a rosbridge subscriber as JSON", async () => {
  const { client, info } = await connect();
  const sub = new WebSocket(WS_URL);
  await new Promise((resolve, reject) => {
    sub.once("open", resolve);
    sub.once("error", reject);
  });
  try {
    assert.ok(info.capabilities.includes("clientPublish"));
    const topic = "/fx_node_client_pub";
    const heard = new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no publish within 5 s")), 5000);
      sub.on("message", (data) => {
        const m = JSON.parse(data.toString());
        if (m.op === "publish" && m.topic === topic) {
          clearTimeout(timer);
          resolve(m.msg);
        }
      });
    });
    sub.send(JSON.stringify({ op: "subscribe", topic, type: "std_msgs/msg/String" }));
    const schema = "string data\n";
    const writer = new MessageWriter(parseMessageDefinition(schema, { ros2: true }));
    const chan = client.advertise({ topic, encoding: "cdr", schemaName: "std_msgs/msg/String", schema, schemaEncoding: "ros2msg" });
    // Until the subscription and the advertisement are both in place.
    const timer = setInterval(() => client.sendMessage(chan, writer.writeMessage({ data: "from foxglove" })), 20);
    try {
      assert.deepEqual(await heard, { data: "from foxglove" });
    } finally {
      clearInterval(timer);
    }
  } finally {
    sub.close();
    client.close();
  }
});

test("services: a CDR call from MessageWriter is answered in CDR the reader decodes", async () => {
  const { client, info } = await connect();
  const prov = new WebSocket(WS_URL);
  await new Promise((resolve, reject) => {
    prov.once("open", resolve);
    prov.once("error", reject);
  });
  try {
    assert.ok(info.capabilities.includes("services"));
    const name = "/fx_node_add";
    // A rosbridge provider: adds.
    prov.on("message", (data) => {
      const m = JSON.parse(data.toString());
      if (m.op === "call_service" && m.service === name) {
        prov.send(JSON.stringify({ op: "service_response", service: name, id: m.id, values: { sum: m.args.a + m.args.b }, result: true }));
      }
    });
    const advertised = next(client, "advertiseServices", (svcs) => svcs.some((s) => s.name === name));
    prov.send(JSON.stringify({ op: "advertise_service", service: name, type: "example_interfaces/srv/AddTwoInts" }));
    const service = (await advertised).find((s) => s.name === name);
    assert.equal(service.request.encoding, "cdr");
    const writer = new MessageWriter(parseMessageDefinition(service.request.schema, { ros2: true }));
    const reader = new MessageReader(parseMessageDefinition(service.response.schema, { ros2: true }));
    const answered = next(client, "serviceCallResponse", (r) => r.callId === 41);
    const body = writer.writeMessage({ a: 40n, b: 2n });
    client.sendServiceCallRequest({ serviceId: service.id, callId: 41, encoding: "cdr", data: new DataView(body.buffer, body.byteOffset, body.byteLength) });
    const r = await answered;
    assert.equal(r.serviceId, service.id);
    assert.equal(r.encoding, "cdr");
    const decoded = reader.readMessage(new Uint8Array(r.data.buffer, r.data.byteOffset, r.data.byteLength));
    assert.equal(decoded.sum, 42n);
    // A call to no service: serviceCallFailure with the call id.
    const failed = next(client, "serviceCallFailure", (f) => f.callId === 43);
    client.sendServiceCallRequest({ serviceId: 987654, callId: 43, encoding: "json", data: new DataView(new TextEncoder().encode("{}").buffer) });
    assert.match((await failed).message, /no service 987654/);
  } finally {
    prov.close();
    client.close();
  }
});

test("parameters: get, set through the owner's rules, and updates", async () => {
  const { client, info } = await connect();
  const owner = new WebSocket(WS_URL.replace(/\/?$/, "/?node=fx_node_owner"));
  await new Promise((resolve, reject) => {
    owner.once("open", resolve);
    owner.once("error", reject);
  });
  try {
    assert.ok(info.capabilities.includes("parameters"));
    // A double (JSON.stringify(2.0) is "2", an integer): as a ParameterValue.
    owner.send(JSON.stringify({ op: "declare_parameter", name: "gain", value: { type: 3, double_value: 2 }, id: "d" }));
    const name = "/fx_node_owner.gain";
    // Until the declaration was read.
    let values;
    for (let i = 0; i < 50 && !values?.parameters.length; i++) {
      const got = next(client, "parameterValues", (v) => v.id === `g${i}`);
      client.getParameters([name], `g${i}`);
      values = await got;
      if (!values.parameters.length) await new Promise((r) => setTimeout(r, 20));
    }
    assert.deepEqual(values.parameters, [{ name, value: 2, type: "float64" }]);
    client.subscribeParameterUpdates([name]);
    const update = next(client, "parameterValues", (v) => v.id === undefined);
    const reply = next(client, "parameterValues", (v) => v.id === "s");
    client.setParameters([{ name, value: 1.25 }], "s");
    assert.equal((await reply).parameters[0].value, 1.25);
    assert.equal((await update).parameters[0].value, 1.25);
  } finally {
    owner.close();
    client.close();
  }
});

test("connection graph: the publisher's node, then its subscriber", async () => {
  const { client, info } = await connect();
  const talker = new WebSocket(WS_URL.replace(/\/?$/, "/?node=fx_node_talker"));
  await new Promise((resolve, reject) => {
    talker.once("open", resolve);
    talker.once("error", reject);
  });
  try {
    assert.ok(info.capabilities.includes("connectionGraph"));
    const topic = "/fx_node_graph";
    const seen = next(client, "connectionGraphUpdate", (u) =>
      u.publishedTopics.some((t) => t.name === topic && t.publisherIds.includes("/fx_node_talker")));
    client.subscribeConnectionGraph();
    talker.send(JSON.stringify({ op: "advertise", topic, type: "std_msgs/msg/String" }));
    await seen;
    const gone = next(client, "connectionGraphUpdate", (u) => u.removedTopics.includes(topic));
    talker.close();
    await gone;
  } finally {
    client.close();
  }
});

// scripts/clients.sh starts the gateway with --foxglove-assets DIR, DIR
// holding robot/meshes/base.stl with ROSGATE_FOXGLOVE_ASSET_TEXT in it.
test("assets: a package:// file is fetched, a path out of the directory refused", async () => {
  const text = process.env.ROSGATE_FOXGLOVE_ASSET_TEXT;
  if (!text) throw new Error("ROSGATE_FOXGLOVE_ASSET_TEXT is not set: run through scripts/clients.sh");
  const { client, info } = await connect();
  try {
    assert.ok(info.capabilities.includes("assets"), JSON.stringify(info.capabilities));
    const ok = next(client, "fetchAssetResponse", (r) => r.requestId === 11);
    client.fetchAsset("package://robot/meshes/base.stl", 11);
    const got = await ok;
    assert.equal(got.status, 0, got.error);
    assert.equal(new TextDecoder().decode(got.data), text);
    const bad = next(client, "fetchAssetResponse", (r) => r.requestId === 12);
    client.fetchAsset("package://robot/../../etc/passwd", 12);
    const refused = await bad;
    assert.equal(refused.status, 1);
    assert.match(refused.error, /\.\./);
  } finally {
    client.close();
  }
});
