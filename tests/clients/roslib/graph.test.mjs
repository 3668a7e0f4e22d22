// The ROS graph through roslib 2.x's own introspection API: rosgate serves
// rosapi natively (docs/protocol.md, "rosapi, served natively"), so
// ros.getTopics(), getServices(), getNodes(), getNodeDetails(),
// getTopicType(), getServiceType() and getTopicsForType() describe what
// other connections registered. Also: a node declared by the WebSocket URL
// (or, on the TCP port, by declare_node), and the latched /client_count.

import { describe, test, afterEach } from "node:test";
import assert from "node:assert/strict";
import { once } from "node:events";
import { Service, Topic } from "roslib";
import { TRANSPORTS, Session, ServiceFailure, collector, stats, unique, withTimeout } from "./harness.mjs";

const STRING = "std_msgs/String";
const ADD = "rospy_tutorials/AddTwoInts";

/** A roslib callback-style API call as a promise (rejects with ServiceFailure). */
function api(what, start) {
  const done = new Promise((resolve, reject) => start(resolve, (reason) => reject(new ServiceFailure(reason))));
  return withTimeout(done, 5000, what);
}

const getTopics = (ros) => api("getTopics", (ok, fail) => ros.getTopics(ok, fail));
const getServices = (ros) => api("getServices", (ok, fail) => ros.getServices(ok, fail));
const getNodes = (ros) => api("getNodes", (ok, fail) => ros.getNodes(ok, fail));
const getNodeDetails = (ros, node) => api(`getNodeDetails ${node}`, (ok, fail) => ros.getNodeDetails(node, ok, fail));
const getTopicType = (ros, topic) => api(`getTopicType ${topic}`, (ok, fail) => ros.getTopicType(topic, ok, fail));
const getServiceType = (ros, service) =>
  api(`getServiceType ${service}`, (ok, fail) => ros.getServiceType(service, ok, fail));
const getTopicsForType = (ros, type) =>
  api(`getTopicsForType ${type}`, (ok, fail) => ros.getTopicsForType(type, ok, fail));

/**
 * rosapi's Publishers/Subscribers services, which roslib has no method for:
 * called as any service, with rosapi's request and response fields.
 */
function endpoints(ros, kind, topic) {
  const serviceType = `rosapi/${kind[0].toUpperCase()}${kind.slice(1)}`;
  const service = new Service({ ros, name: `rosapi/${kind}`, serviceType });
  return api(`rosapi/${kind} ${topic}`, (ok, fail) => service.callService({ topic }, (values) => ok(values[kind]), fail));
}

const sorted = (list) => [...list].sort();

/** The node name rosgate gives a connection that declared none. */
function ownNodePattern(transport) {
  return transport.name === "websocket" ? /^\/rosgate_ws_\d+$/ : /^\/rosgate_tcp_\d+$/;
}

/** Closes one connection of the session and waits until the close completes. */
async function closeOne(session, ros) {
  const closed = withTimeout(once(ros, "close"), 5000, "close");
  ros.close();
  await closed;
  session.open.delete(ros);
}

let types = 0;
/** A type name no other test uses (types are informational to rosgate). */
function uniqueType() {
  types += 1;
  return `rosgate_test/msg/Probe${process.pid}x${types}`;
}

for (const transport of TRANSPORTS) {
  describe(`graph introspection over ${transport.name}`, () => {
    let session;
    afterEach(async () => {
      await session?.closeAll();
      session = undefined;
    });

    test("getTopics, getTopicType and getTopicsForType see another connection's topics and /rosout", async () => {
      session = new Session(transport);
      const provider = await session.connect();
      const observer = await session.connect();
      const pubName = unique(transport, "graph_pub");
      const subName = unique(transport, "graph_sub");
      const type = uniqueType();
      new Topic({ ros: provider, name: pubName, messageType: type }).advertise();
      new Topic({ ros: provider, name: subName, messageType: STRING }).subscribe(() => {});
      await stats(provider);

      const { topics, types } = await getTopics(observer);
      assert.equal(topics.length, types.length, "topics and types go in pairs");
      assert.deepEqual(topics, sorted(topics), "topics are sorted");
      const typeOf = (name) => {
        const i = topics.indexOf(name);
        assert.ok(i >= 0, `${name} missing from getTopics: ${JSON.stringify(topics)}`);
        return types[i];
      };
      assert.equal(typeOf(pubName), type);
      assert.equal(typeOf(subName), STRING);
      assert.equal(typeOf("/rosout"), "rcl_interfaces/msg/Log");
      assert.equal(typeOf("/client_count"), "std_msgs/msg/Int32");
      assert.equal(typeOf("/connected_clients"), "rosbridge_msgs/msg/ConnectedClients");

      assert.equal(await getTopicType(observer, pubName), type);
      assert.equal(await getTopicType(observer, subName), STRING);
      assert.equal(await getTopicType(observer, "/rosout"), "rcl_interfaces/msg/Log");
      assert.equal(await getTopicType(observer, unique(transport, "nobody")), "");
      assert.deepEqual(await getTopicsForType(observer, type), [pubName]);
      assert.ok((await getTopicsForType(observer, STRING)).includes(subName));
      assert.deepEqual(await getTopicsForType(observer, uniqueType()), []);

      // A closed connection's topics leave the graph.
      await closeOne(session, provider);
      const after = (await getTopics(observer)).topics;
      assert.ok(!after.includes(pubName) && !after.includes(subName), JSON.stringify(after));
      assert.ok(after.includes("/rosout"));
      assert.deepEqual(await getTopicsForType(observer, type), []);
      assert.equal(await getTopicType(observer, pubName), "");
    });

    test("getServices and getServiceType list advertised services and rosapi's own", async () => {
      session = new Session(transport);
      const provider = await session.connect();
      const observer = await session.connect();
      const name = unique(transport, "graph_add");
      const server = new Service({ ros: provider, name, serviceType: ADD });
      await server.advertiseAsync(async ({ a, b }) => ({ sum: a + b }));
      await stats(provider);

      const services = await getServices(observer);
      assert.deepEqual(services, sorted(services), "services are sorted");
      for (const s of [name, "/rosapi/topics", "/rosapi/nodes", "/rosapi/node_details", "/rosgate/stats"]) {
        assert.ok(services.includes(s), `${s} missing from getServices: ${JSON.stringify(services)}`);
      }
      assert.equal(await getServiceType(observer, name), ADD);
      assert.equal(await getServiceType(observer, "/rosapi/topics"), "rosapi_msgs/srv/Topics");
      assert.equal(await getServiceType(observer, unique(transport, "nobody")), "");

      await server.unadvertise();
      await stats(provider);
      assert.ok(!(await getServices(observer)).includes(name));
      assert.equal(await getServiceType(observer, name), "");
    });

    test("getNodes, getNodeDetails and rosapi/publishers name a connection's own node", async () => {
      session = new Session(transport);
      const provider = await session.connect();
      const observer = await session.connect();
      const pubName = unique(transport, "node_pub");
      const subName = unique(transport, "node_sub");
      const srvName = unique(transport, "node_srv");
      new Topic({ ros: provider, name: pubName, messageType: STRING }).advertise();
      new Topic({ ros: provider, name: subName, messageType: STRING }).subscribe(() => {});
      await new Service({ ros: provider, name: srvName, serviceType: ADD }).advertiseAsync(async () => ({ sum: 0 }));
      await stats(provider);

      const publishers = await endpoints(observer, "publishers", pubName);
      assert.equal(publishers.length, 1, JSON.stringify(publishers));
      const node = publishers[0];
      assert.match(node, ownNodePattern(transport));
      assert.deepEqual(await endpoints(observer, "subscribers", subName), [node]);
      assert.deepEqual(await endpoints(observer, "publishers", subName), []);
      assert.ok((await endpoints(observer, "publishers", "/rosout")).includes("/rosgate"));

      const nodes = await getNodes(observer);
      assert.deepEqual(nodes, sorted(nodes), "nodes are sorted");
      assert.ok(nodes.includes(node), `${node} missing from getNodes: ${JSON.stringify(nodes)}`);
      assert.ok(nodes.includes("/rosgate"));

      assert.deepEqual(await getNodeDetails(observer, node), {
        subscribing: [subName],
        publishing: [pubName],
        services: [srvName],
      });
      const gateway = await getNodeDetails(observer, "/rosgate");
      for (const t of ["/rosout", "/client_count", "/connected_clients"]) assert.ok(gateway.publishing.includes(t), t);
      assert.ok(gateway.services.includes("/rosapi/topics"));

      // A closed connection's node leaves the graph.
      await closeOne(session, provider);
      assert.ok(!(await getNodes(observer)).includes(node));
      assert.deepEqual(await endpoints(observer, "publishers", pubName), []);
    });

    // roslib cannot send an op before its first subscribe on WebSocket, so
    // the URL declares the node there; the TCP port takes declare_node,
    // sent here through roslib's own connection.
    const declares = transport.name === "websocket" ? "the URL's ?node=viewer&namespace=/r1" : "declare_node";
    test(`a node declared by ${declares} is /r1/viewer in getNodes and getNodeDetails`, async () => {
      session = new Session(transport);
      let viewer;
      if (transport.name === "websocket") {
        viewer = await session.connect(`${transport.url}/?node=viewer&namespace=/r1`);
      } else {
        viewer = await session.connect();
        const id = `declare:${process.pid}`;
        const status = withTimeout(once(viewer, `status:${id}`), 5000, "declare_node status");
        viewer.callOnConnection({ op: "declare_node", name: "viewer", namespace: "/r1", id });
        const [answer] = await status;
        assert.equal(answer.level, "info", JSON.stringify(answer));
        assert.match(answer.msg, /\/r1\/viewer/);
      }
      const observer = await session.connect();
      const absolute = unique(transport, "viewer_abs");
      const relative = unique(transport, "viewer_rel").slice(1); // resolved in /r1
      const published = unique(transport, "viewer_pub");
      const sub = new Topic({ ros: viewer, name: absolute, messageType: STRING });
      const got = collector();
      sub.subscribe(got);
      new Topic({ ros: viewer, name: relative, messageType: STRING }).subscribe(() => {});
      new Topic({ ros: viewer, name: published, messageType: STRING }).advertise();
      await stats(viewer);

      const nodes = await getNodes(observer);
      assert.ok(nodes.includes("/r1/viewer"), `/r1/viewer missing from getNodes: ${JSON.stringify(nodes)}`);
      assert.deepEqual(await getNodeDetails(observer, "/r1/viewer"), {
        subscribing: sorted([absolute, `/r1/${relative}`]),
        publishing: [published],
        services: [],
      });
      assert.deepEqual(await endpoints(observer, "subscribers", absolute), ["/r1/viewer"]);
      // The registrations belong to the node, not to the connection's own name.
      assert.deepEqual(await endpoints(observer, "publishers", published), ["/r1/viewer"]);
      // rosapi answers "rosapi/..." from inside /r1 too (roslib omits the slash).
      assert.ok((await getNodes(viewer)).includes("/r1/viewer"));

      // Absolute names reach the node's subscription as written.
      new Topic({ ros: observer, name: absolute, messageType: STRING }).publish({ data: "to viewer" });
      await got.waitFor(1);
      assert.equal(got.messages[0].data, "to viewer");

      await closeOne(session, viewer);
      assert.ok(!(await getNodes(observer)).includes("/r1/viewer"));
      assert.deepEqual(await endpoints(observer, "subscribers", absolute), []);
    });

    test("subscribing to /client_count yields {data: N} at once, then every change", async () => {
      session = new Session(transport);
      const ros = await session.connect();
      const counts = collector();
      new Topic({ ros, name: "/client_count", messageType: "std_msgs/msg/Int32" }).subscribe(counts);
      await counts.waitFor(1, 2000); // latched: no change needed
      const [first] = counts.messages;
      assert.deepEqual(Object.keys(first), ["data"], JSON.stringify(first));
      assert.ok(Number.isInteger(first.data) && first.data >= 1, JSON.stringify(first));

      const other = await session.connect();
      // A TCP client completes its opening with its first line (a WebSocket
      // one with the upgrade): only then does it count.
      await stats(other);
      await counts.waitFor(2);
      assert.deepEqual(counts.messages[1], { data: first.data + 1 });
      await closeOne(session, other);
      await counts.waitFor(3);
      assert.deepEqual(counts.messages[2], { data: first.data });
      await stats(ros);
      assert.equal(counts.messages.length, 3, JSON.stringify(counts.messages));
    });
  });
}
