// Shared helpers for the roslib (npm, 2.x) tests against rosgate.
//
// scripts/clients.sh starts rosgate on ephemeral ports and passes
// ROSGATE_WS_URL (ws://127.0.0.1:PORT) and ROSGATE_TCP_ADDR (127.0.0.1:PORT).
// Every test runs twice: over WebSocket with roslib's own transport, and over
// rosgate's NDJSON TCP port through NdjsonTcpTransport below, a custom
// transport given to `new Ros({ transportFactory })` as roslib 2.x allows.

import net from "node:net";
import { once } from "node:events";
import { AbstractTransport, Ros, Service, WebSocketTransportFactory } from "roslib";

const WS_URL = process.env.ROSGATE_WS_URL;
const TCP_ADDR = process.env.ROSGATE_TCP_ADDR;
if (!WS_URL || !TCP_ADDR) {
  throw new Error("ROSGATE_WS_URL / ROSGATE_TCP_ADDR are not set: run through scripts/clients.sh");
}

/**
 * roslib transport over rosgate's NDJSON TCP listener: one compact JSON
 * object per line each way. Incoming lines go through AbstractTransport's
 * handleRawMessage, exactly like WebSocket text frames.
 */
export class NdjsonTcpTransport extends AbstractTransport {
  #socket;
  #state = "connecting";
  #pending = "";

  constructor(socket) {
    super();
    this.#socket = socket;
    socket.setEncoding("utf8"); // multi-byte characters split across reads stay whole
    socket.setNoDelay(true);
    socket.on("connect", () => {
      this.#state = "open";
      this.emit("open", { type: "open" });
    });
    socket.on("data", (chunk) => {
      this.#pending += chunk;
      let nl;
      while ((nl = this.#pending.indexOf("\n")) >= 0) {
        const line = this.#pending.slice(0, nl).replace(/\r$/, "");
        this.#pending = this.#pending.slice(nl + 1);
        if (line.length > 0) this.handleRawMessage(line);
      }
    });
    socket.on("error", (err) => this.emit("error", err));
    socket.on("close", (hadError) => {
      this.#state = "closed";
      this.emit("close", { type: "close", hadError });
    });
  }

  send(message) {
    this.#socket.write(JSON.stringify(message) + "\n");
  }

  close() {
    if (this.#state === "closed") return;
    this.#state = "closing";
    this.#socket.end();
  }

  /** Abrupt loss of the connection (no orderly close). */
  destroy() {
    this.#socket.destroy();
  }

  /** Stops reading from the socket (a client that falls behind). */
  pause() {
    this.#socket.pause();
  }

  resume() {
    this.#socket.resume();
  }

  isConnecting() {
    return this.#state === "connecting";
  }
  isOpen() {
    return this.#state === "open";
  }
  isClosing() {
    return this.#state === "closing";
  }
  isClosed() {
    return this.#state === "closed";
  }
}

/** transportFactory for `tcp://host:port` URLs. */
export async function ndjsonTcpTransportFactory(url) {
  const { hostname, port } = new URL(url);
  return new NdjsonTcpTransport(net.connect({ host: hostname, port: Number(port) }));
}

/** The two ways the tests reach rosgate. */
export const TRANSPORTS = [
  {
    name: "websocket",
    url: WS_URL,
    factory: WebSocketTransportFactory,
    // rosbridge dialect: subscriptions/advertisements are per request id.
    perIdRegistrations: true,
    /** Kills the connection without a close handshake. */
    drop(ros) {
      ros.transport.socket.terminate();
    },
    /** Stops reading from the socket (ws's own pause), until resume. */
    pause(ros) {
      ros.transport.socket.pause();
    },
    resume(ros) {
      ros.transport.socket.resume();
    },
  },
  {
    name: "ndjson-tcp",
    url: `tcp://${TCP_ADDR}`,
    factory: ndjsonTcpTransportFactory,
    // Strict protocol (docs/protocol.md): registrations are per connection,
    // so any unsubscribe/unadvertise of a topic withdraws the connection's.
    perIdRegistrations: false,
    drop(ros) {
      ros.transport.destroy();
    },
    pause(ros) {
      ros.transport.pause();
    },
    resume(ros) {
      ros.transport.resume();
    },
  },
];

/** Rejects after `ms` with `what` in the message. */
export function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Opens connections for one test and closes them all afterwards, waiting
 * for each close to complete (after which rosgate has dropped that
 * connection's registrations).
 */
export class Session {
  constructor(transport) {
    this.transport = transport;
    this.open = new Set();
  }

  /** Connects to the transport's URL, or to `url` (same transport). */
  async connect(url = this.transport.url) {
    const ros = new Ros({ transportFactory: this.transport.factory });
    ros.on("error", () => {}); // surfaced by the assertions instead
    const connected = once(ros, "connection");
    await ros.connect(url);
    await withTimeout(connected, 5000, `connect to ${url}`);
    this.open.add(ros);
    return ros;
  }

  async reconnect(ros) {
    const connected = once(ros, "connection");
    await ros.connect(this.transport.url);
    await withTimeout(connected, 5000, `reconnect to ${this.transport.url}`);
  }

  async closeAll() {
    const closing = [];
    for (const ros of this.open) {
      if (ros.transport && !ros.transport.isClosed()) {
        closing.push(withTimeout(once(ros, "close"), 5000, "close"));
        ros.close();
      }
    }
    this.open.clear();
    await Promise.all(closing);
  }
}

/** callService as a promise: resolves with values, rejects with the failure reason. */
export function call(ros, name, args = {}, timeoutSeconds = undefined) {
  return new Promise((resolve, reject) => {
    const service = new Service({ ros, name, serviceType: "any/Any" });
    service.callService(args, resolve, (reason) => reject(new ServiceFailure(reason)), timeoutSeconds);
  });
}

export class ServiceFailure extends Error {
  constructor(reason) {
    super(typeof reason === "string" ? reason : JSON.stringify(reason));
    this.reason = reason;
  }
}

/**
 * Round trip on `ros`'s own connection: rosgate handles a connection's
 * requests in order, so once /rosgate/stats answers, everything sent
 * before it on that connection (subscribe, unsubscribe, advertise_service,
 * publish...) has been applied, and publishes have been fanned out.
 */
export function stats(ros) {
  return withTimeout(call(ros, "/rosgate/stats"), 5000, "/rosgate/stats");
}

/** Collects the messages a Topic callback receives. */
export function collector() {
  const got = [];
  const waiters = [];
  const fn = (msg) => {
    got.push(msg);
    for (const w of waiters.splice(0)) w();
  };
  fn.messages = got;
  fn.waitFor = async (n, ms = 5000) => {
    const deadline = Date.now() + ms;
    while (got.length < n) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`expected ${n} messages, got ${got.length}`);
      // A timer that is cleared once a message arrives, so that no timer
      // outlives the test and keeps the process alive.
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, left);
        waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return got;
  };
  return fn;
}

/** A unique topic/service name per test and transport. */
let counter = 0;
export function unique(transport, base) {
  counter += 1;
  return `/roslib_${transport.name.replace(/-/g, "_")}/${base}_${process.pid}_${counter}`;
}
