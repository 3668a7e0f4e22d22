// roslib (node) over wss:// against a rosgate started with --tls-cert.
//
// Run by scripts/clients.sh (suite `tls`): `node tls_check.mjs WSS_URL
// [--expect-refused]`; the URL carries `?token=` when the gateway runs with
// --auth-tokens. The certificate is trusted the way a node user
// would: NODE_EXTRA_CA_CERTS=cert.pem. Subscribes and publishes, advertises
// and calls a service, prints what it heard; exits non-zero on failure.
// With --expect-refused (no NODE_EXTRA_CA_CERTS, or no token) the
// connection must fail.

import * as ROSLIB from "roslib";

const [url, flag] = process.argv.slice(2);
const expectRefused = flag === "--expect-refused";
setTimeout(() => {
  console.error("tls_check.mjs: timed out");
  process.exit(1);
}, 10000).unref();

const ros = new ROSLIB.Ros({ url });
try {
  await new Promise((ok, fail) => {
    ros.on("connection", ok);
    ros.on("error", fail);
    ros.on("close", () => fail(new Error("closed")));
  });
} catch (e) {
  if (expectRefused) {
    console.log("refused");
    process.exit(0);
  }
  throw e;
}
if (expectRefused) {
  console.log("connected although the certificate is not trusted");
  process.exit(1);
}

const heard = new Promise((ok) => {
  const chatter = new ROSLIB.Topic({ ros, name: "/tls_chatter", messageType: "std_msgs/msg/String" });
  chatter.subscribe((m) => {
    console.log("heard", m.data);
    ok();
  });
  chatter.publish({ data: "hello" });
});

const add = new ROSLIB.Service({ ros, name: "/tls_add", serviceType: "example_interfaces/srv/AddTwoInts" });
await add.advertise((req, resp) => {
  resp.sum = req.a + req.b;
  return true;
});
const client = new ROSLIB.Service({ ros, name: "/tls_add", serviceType: "example_interfaces/srv/AddTwoInts" });
const sum = await new Promise((ok, fail) => client.callService({ a: 1, b: 2 }, (r) => ok(r.sum), fail));
console.log("1 + 2 =", sum);
await heard;
ros.close();
process.exit(0);
