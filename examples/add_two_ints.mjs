import * as ROSLIB from 'roslib';

const ros = new ROSLIB.Ros({ url: 'ws://127.0.0.1:9090' });
await new Promise((ok, fail) => { ros.on('connection', ok); ros.on('error', fail); });

// Provide /add, then call it (any other client could be the caller).
const add = new ROSLIB.Service({ ros, name: '/add', serviceType: 'example_interfaces/srv/AddTwoInts' });
await add.advertise((req, resp) => { resp.sum = req.a + req.b; return true; });

const chatter = new ROSLIB.Topic({ ros, name: '/chatter', messageType: 'std_msgs/msg/String' });
chatter.subscribe((m) => console.log('heard', m.data));
chatter.publish({ data: 'hello' });

// A Service object that advertises does not call: use another one.
const client = new ROSLIB.Service({ ros, name: '/add', serviceType: 'example_interfaces/srv/AddTwoInts' });
client.callService({ a: 1, b: 2 }, (r) => {
  console.log('1 + 2 =', r.sum);
  ros.close();
}, (e) => { console.error('call failed:', e); ros.close(); });
