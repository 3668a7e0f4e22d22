// TF through roslib 2.x's own TF clients, unchanged: TFClient (the ROS 1
// actionlib action /tf2_web_republisher over its goal/cancel/feedback
// topics) and ROS2TFClient (the ROS 2 action /tf2_web_republisher), both
// served by rosgate itself (docs/tf.md), on both transports. Another
// connection publishes a /tf_static link (world -> odom, latched) and a
// moving /tf link (odom -> base, re-sent every 50 ms as a robot's state
// publisher does); the client must get base in world, composed, and get it
// again when it moves past the translation threshold.

import { describe, test, afterEach } from "node:test";
import assert from "node:assert/strict";
import { Topic, TFClient, ROS2TFClient } from "roslib";
import { TRANSPORTS, Session, stats, unique, withTimeout } from "./harness.mjs";

const TF_MESSAGE = "tf2_msgs/msg/TFMessage";

function stamped(parent, child, x, y) {
  const now = Date.now();
  return {
    header: {
      stamp: { sec: Math.floor(now / 1000), nanosec: (now % 1000) * 1e6 },
      frame_id: parent,
    },
    child_frame_id: child,
    transform: {
      translation: { x, y, z: 0 },
      rotation: { x: 0, y: 0, z: 0, w: 1 },
    },
  };
}

/**
 * A robot on connection `ros`: world -> odom on /tf_static (1, 2),
 * odom -> base on /tf at `pose.x` (re-sent every 50 ms). Frame ids are
 * unique per test (the gateway's buffer is shared by its domain).
 */
function robot(ros, transport) {
  const prefix = unique(transport, "tf").slice(1);
  const frames = { world: `${prefix}/world`, odom: `${prefix}/odom`, base: `${prefix}/base` };
  const tfStatic = new Topic({ ros, name: "/tf_static", messageType: TF_MESSAGE, latch: true });
  const tf = new Topic({ ros, name: "/tf", messageType: TF_MESSAGE });
  tfStatic.publish({ transforms: [stamped(frames.world, frames.odom, 1, 2)] });
  const pose = { x: 0.5 };
  const timer = setInterval(() => {
    tf.publish({ transforms: [stamped(frames.odom, frames.base, pose.x, 0)] });
  }, 50);
  return { frames, pose, stop: () => clearInterval(timer) };
}

/** Transforms a TF client calls back with, and a wait for one matching. */
function transforms() {
  const got = [];
  let waiters = [];
  return {
    got,
    cb: (t) => {
      got.push(t);
      waiters = waiters.filter((w) => !w());
    },
    waitFor(pred, what, ms = 5000) {
      return withTimeout(
        new Promise((resolve) => {
          const check = () => {
            const t = got.find(pred);
            if (t) resolve(t);
            return Boolean(t);
          };
          if (!check()) waiters.push(check);
        }),
        ms,
        what,
      );
    },
  };
}

const near = (a, b) => Math.abs(a - b) < 1e-6;

for (const transport of TRANSPORTS) {
  describe(`TF over ${transport.name}`, () => {
    let session;
    let bot;
    afterEach(async () => {
      bot?.stop();
      bot = undefined;
      await session?.closeAll();
      session = undefined;
    });

    for (const [label, Client] of [
      ["TFClient (ROS 1 action)", TFClient],
      ["ROS2TFClient (ROS 2 action)", ROS2TFClient],
    ]) {
      test(`${label} gets base in world through /tf_static + /tf and follows it`, async () => {
        session = new Session(transport);
        const robotRos = await session.connect();
        const ros = await session.connect();
        bot = robot(robotRos, transport);
        await stats(robotRos); // the static link is in before the client asks
        const client = new Client({ ros, fixedFrame: bot.frames.world, rate: 20 });
        const seen = transforms();
        client.subscribe(`/${bot.frames.base}`, seen.cb);
        const first = await seen.waitFor(
          (t) => near(t.translation.x, 1.5),
          `${label}: base at x 1.5 (1 static + 0.5 dynamic)`,
        );
        assert.ok(near(first.translation.y, 2), JSON.stringify(first));
        assert.ok(near(first.rotation.w, 1), JSON.stringify(first));
        bot.pose.x = 3;
        const moved = await seen.waitFor(
          (t) => near(t.translation.x, 4),
          `${label}: base follows to x 4`,
        );
        assert.ok(near(moved.translation.y, 2), JSON.stringify(moved));
        client.dispose();
      });
    }
  });
}
