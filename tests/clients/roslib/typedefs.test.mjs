// Message definitions as real clients read them (docs/protocol.md, "rosapi,
// served natively"): every `typedefs_full_text` rosgate gives for the
// bundled message types goes through @foxglove/rosmsg's
// parse(text, { ros2: true }), the parser the Foxglove app uses for a
// rosbridge connection, and must resolve every nested type; and roslib's
// getMessageDetails/decodeTypeDefs turn message_details into a message
// skeleton without "Cannot find" errors.

import { describe, test, afterEach } from "node:test";
import assert from "node:assert/strict";
import { parse } from "@foxglove/rosmsg";
import { Topic } from "roslib";
import { TRANSPORTS, Session, ServiceFailure, call, stats, unique, withTimeout } from "./harness.mjs";

/** A roslib callback-style API call as a promise (rejects with ServiceFailure). */
function api(what, start) {
  const done = new Promise((resolve, reject) => start(resolve, (reason) => reject(new ServiceFailure(reason))));
  return withTimeout(done, 10000, what);
}

const topicsAndRawTypes = (ros) => api("getTopicsAndRawTypes", (ok, fail) => ros.getTopicsAndRawTypes(ok, fail));
const messageDetails = (ros, type) => api(`getMessageDetails ${type}`, (ok, fail) => ros.getMessageDetails(type, ok, fail));

/** The fields (not constants) of a parsed definition, by name. */
const fieldNames = (def) => def.definitions.filter((d) => !d.isConstant).map((d) => d.name);

for (const transport of TRANSPORTS) {
  describe(`message definitions over ${transport.name}`, () => {
    let session;
    afterEach(async () => {
      await session?.closeAll();
      session = undefined;
    });

    test("@foxglove/rosmsg parses the full text of every bundled message type", async () => {
      session = new Session(transport);
      const ros = await session.connect();
      const { interfaces } = await call(ros, "/rosapi/interfaces");
      const msgTypes = interfaces.filter((t) => t.split("/")[1] === "msg");
      assert.ok(msgTypes.length > 150, `${msgTypes.length} message types`);
      // One topic per type, plus an action's feedback topic type (it names
      // `pkg/action/...` structs) and a type rosgate does not know.
      const extra = ["example_interfaces/action/Fibonacci_FeedbackMessage", "mystery_msgs/msg/Unknown"];
      const topicOf = new Map();
      for (const [i, type] of [...msgTypes, ...extra].entries()) {
        const name = unique(transport, `td${i}`);
        new Topic({ ros, name, messageType: type }).advertise();
        topicOf.set(type, name);
      }
      await stats(ros); // a round trip: the advertisements are in

      const { topics, types, typedefs_full_text: texts } = await topicsAndRawTypes(ros);
      assert.equal(texts.length, topics.length);
      assert.equal(types.length, topics.length);
      let parsed = 0;
      for (const [type, name] of topicOf) {
        const i = topics.indexOf(name);
        assert.ok(i >= 0, `${name} listed`);
        assert.equal(types[i], type);
        const text = texts[i];
        if (type.startsWith("mystery_msgs/")) {
          assert.equal(text, "", "an unknown type has no text");
          continue;
        }
        let defs;
        try {
          defs = parse(text, { ros2: true });
        } catch (e) {
          assert.fail(`${type}: rosmsg refused the text: ${e.message}\n${text}`);
        }
        // The root comes first and unnamed; each nested one is named once.
        assert.equal(defs[0].name, undefined, type);
        const named = defs.slice(1).map((d) => d.name);
        assert.equal(new Set(named).size, named.length, `${type}: each nested type once`);
        for (const d of defs) {
          for (const f of d.definitions) {
            if (f.isComplex) assert.ok(named.includes(f.type), `${type}: ${f.type} resolved`);
          }
        }
        parsed += 1;
      }
      assert.equal(parsed, topicOf.size - 1);

      // Spot checks against what the Foxglove app reads from them.
      const at = (type) => parse(texts[topics.indexOf(topicOf.get(type))], { ros2: true });
      const image = at("sensor_msgs/msg/Image");
      assert.deepEqual(fieldNames(image[0]), ["header", "height", "width", "encoding", "is_bigendian", "step", "data"]);
      const header = image[0].definitions[0];
      assert.equal(header.type, "std_msgs/msg/Header");
      assert.equal(header.isComplex, true);
      const data = image[0].definitions[6];
      assert.equal(data.type, "uint8");
      assert.equal(data.isArray, true);
      // builtin_interfaces/Time is rosmsg's `time`.
      const headerDef = image.find((d) => d.name === "std_msgs/msg/Header");
      assert.equal(headerDef.definitions[0].type, "time");

      const pose = at("geometry_msgs/msg/PoseStamped");
      const quaternion = pose.find((d) => d.name === "geometry_msgs/msg/Quaternion");
      assert.deepEqual(
        quaternion.definitions.map((d) => [d.name, d.defaultValue]),
        [["x", 0], ["y", 0], ["z", 0], ["w", 1]],
      );
      const status = at("action_msgs/msg/GoalStatus");
      const unknown = status[0].definitions.find((d) => d.name === "STATUS_UNKNOWN");
      assert.equal(unknown.isConstant, true);
      assert.equal(unknown.value, 0);
      const feedback = at("example_interfaces/action/Fibonacci_FeedbackMessage");
      assert.deepEqual(
        feedback[0].definitions.map((d) => d.type),
        ["unique_identifier_msgs/msg/UUID", "example_interfaces/action/Fibonacci_Feedback"],
      );
    });

    test("getMessageDetails and decodeTypeDefs give a message's skeleton", async () => {
      session = new Session(transport);
      const ros = await session.connect();
      const errors = [];
      ros.on("error", (e) => errors.push(e));
      const defs = await messageDetails(ros, "geometry_msgs/msg/PoseStamped");
      assert.deepEqual(
        defs.map((d) => d.type),
        [
          "geometry_msgs/PoseStamped",
          "std_msgs/Header",
          "builtin_interfaces/Time",
          "geometry_msgs/Pose",
          "geometry_msgs/Point",
          "geometry_msgs/Quaternion",
        ],
      );
      assert.deepEqual(ros.decodeTypeDefs(defs), {
        header: { stamp: { sec: "int32", nanosec: "uint32" }, frame_id: "string" },
        pose: {
          position: { x: "double", y: "double", z: "double" },
          orientation: { x: "double", y: "double", z: "double", w: "double" },
        },
      });
      const markers = await messageDetails(ros, "visualization_msgs/MarkerArray");
      const skeleton = ros.decodeTypeDefs(markers);
      assert.ok(Array.isArray(skeleton.markers), JSON.stringify(skeleton));
      assert.equal(skeleton.markers[0].header.frame_id, "string");
      assert.deepEqual(errors, []);

      await assert.rejects(messageDetails(ros, "mystery_msgs/msg/Unknown"), (e) => {
        assert.ok(e instanceof ServiceFailure);
        assert.match(String(e.reason), /unknown message type "mystery_msgs\/msg\/Unknown"/);
        return true;
      });
    });
  });
}
