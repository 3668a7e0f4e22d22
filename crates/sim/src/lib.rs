//! Deterministic simulation of rosgate's sans-io core, the
//! [`rosgate_core::Hub`]: a driver feeds it client [`Action`]s on a fake
//! clock, an independent model predicts every line and frame each client
//! must receive and every table the hub must hold, and the invariants are
//! checked after every step.
//!
//! Used by `tests/sim.rs` (actions drawn from a seeded RNG, [`run_seed`]),
//! by the `core` fuzz target (actions decoded from bytes,
//! [`actions_from_bytes`]) and, through [`fuzzing`], by every fuzz target
//! and the `tests/replay.rs` corpus replay.
//!
//! | module | owns |
//! |---|---|
//! | `rng` | [`Rng`] (seeded schedules) and [`Bytes`] (fuzzer input fields) |
//! | `violation` | [`Violation`], what every check returns (a leaf) |
//! | `actions` | [`SimConfig`], [`Action`], [`Req`], the names requests pick from; drawing them, decoding them from bytes and back |
//! | `ws` | the WebSocket client side: handshakes, masked frames, a strict server-frame parser |
//! | `ws_decode` | what a subscriber in an outgoing encoding decodes, written apart from the gateway's encoders: CBOR (typed arrays, byte strings) as JSON, a `png` frame's text, outgoing `fragment` frames reassembled, a Foxglove message data message and its CDR |
//! | `names` | the model's ROS 2 names: node names, namespaces, remap rules, expansion, a node's bytes |
//! | `model` | the expected state (data only): clients (TCP or WebSocket) with their domain and nodes, owed lines and frames, services, calls; its children `model::goals`, `model::qos`, `model::params` hold those features' data, `model::encodings` a subscription's outgoing encoding and the bytes its queue holds, `model::foxglove` a Foxglove session's channels and subscriptions, `model::requests` a request's model effect |
//! | `driver` | [`Sim`]: one loop turn per action (act, expire, flush, close drained, free), admission, disconnects, the shutdown, [`run_seed`]; its children are the behaviour, each an `impl Sim` block: |
//! | `driver::requests` | the JSON text of each request in its style and dialect, and its model effect |
//! | `driver::feed` | how bytes reach the hub: writes cut into reads, effects applied at the read that completes a request, half-sent requests |
//! | `driver::fragments` | requests sent as rosbridge `fragment` pieces: valid ones (the request's own effect), malformed publishes (one error status with the id, nothing delivered) |
//! | `driver::accounting` | every hub call checked right after it: queued and shed frames, the memory budget's rule, closes and their reasons |
//! | `driver::effects` | what each accepted request does to the model as it is fed |
//! | `driver::controls` | WebSocket control traffic: pings, close frames, protocol violations |
//! | `driver::reader` | the clients' side: received lines and frames crossed off against the model |
//! | `driver::encoded` | the subscribers' side of outgoing encodings: `cbor` binary frames, `png` frames, `fragment` frames, each the next message queued, exactly its bytes, its content the JSON publish |
//! | `driver::foxglove` | Foxglove sessions: the opening with the subprotocol, the typed topic's channel (re-made at the turn's end, learnt from the hub's `advertise`), `subscribe`/`unsubscribe`, message data (exact bytes, the CDR decoded back to the JSON publish), statuses and the drop warning |
//! | `driver::goals` | actions: servers, goals, feedback, results, cancels, orphans; requests waiting for a provider |
//! | `driver::qos` | QoS: latching, depth, throttling, reliability, compatibility, peer counts |
//! | `driver::params` | parameters: the owner's operations, the hub's stores checked, `/parameter_events` |
//! | `driver::param_access` | everyone else's access to parameters (rosapi, the node services) and the owner's validation round trip |
//! | `driver::federation` | the hub as a federated gateway: other gateways' messages (`Action::Remote`, from fuzz input) and the interest it reports, checked every step against the model's subscribers |
//! | `driver::checks` | the invariants: tables, the memory ledger, counters, quiescence, last words, [`Sim::finish`] |
//! | `link` | the ROS 2 link (`rosgate_ros2::link`) on a seeded schedule and a fake clock: every call, goal and ROS 2 request answered exactly once ([`run_link_seed`]; the fuzz target `link` chooses with bytes, [`run_link_bytes`]) |
//! | [`fuzzing`], [`scan_parity`], [`binary`], [`foxglove`] | the fuzz targets' checks (`binary`: CBOR conversion and fragment reassembly; `foxglove`: a Foxglove client's ops and binary messages into the codec and a hub session) |
//!
//! Layers depend downward only, with no import cycle between modules:
//! `driver` (and its children) on `model` (and its children) on `actions`,
//! `names`, `ws`, `ws_decode`, `rng`; `violation` is a leaf.
//!
//! Clients connect over TCP (NDJSON, the base protocol) or WebSocket
//! (rosbridge v2), and both kinds subscribe to the same topics and call
//! each other's services. Either kind may declare ROS 2 nodes (by
//! `declare_node`, or on WebSocket in the URL it connects to) and then
//! use relative, private and remapped names, name a second node of its own
//! in a request, destroy a node, and choose its domain; two domains and a
//! few node names and namespaces keep names colliding within and across
//! domains. Some runs use `--names strict` or put WebSocket clients in
//! another domain by default. The model predicts, independently of the
//! hub's tables:
//! - who subscribes/advertises what (per connection on TCP, per request id
//!   on WebSocket: a repeated (topic, id) is a no-op, `unsubscribe` with an
//!   id removes that id's registration only, without one all of them, and
//!   the router entry lasts while any id remains; every registration is
//!   made for one of the connection's nodes, or for the connection), in
//!   which domain (fixed once a connection holds anything), who provides
//!   each service, which calls are in flight and when each times out (the
//!   timer wheel rounds deadlines up to the next tick, counted from the
//!   hub's creation);
//! - how each name a client writes resolves (as written without a node,
//!   else expanded for the node the request names or the default one and
//!   remapped, or refused as `invalid_name` or `unknown_node`), which
//!   declarations are refused (invalid names, a domain out of range or
//!   changed after registering, a full name declared twice on one
//!   connection) and which URLs get a 400;
//! - every line each client must receive: statuses (matched by id and
//!   level; on WebSocket only those its status filter lets through,
//!   warnings and errors by default; a warning to every owner of a full
//!   name two nodes of a domain share), forwarded calls (in order, with
//!   their args and expanded service name), responses (matched by the
//!   caller's id, which is unique per caller, or by content for rosbridge
//!   calls made without one: exactly one per call, success with the
//!   provider's payload as the caller's dialect reads it, or a
//!   `result:false` failure) and publish frames (in order, exact bytes,
//!   so carrying the expanded name; a slow reader misses exactly the
//!   frames identified as shed, whose bytes the hub counted in
//!   `dropped_bytes`); a WebSocket subscription may ask for an outgoing
//!   encoding (`compression` `cbor`, typed on a topic whose type the
//!   gateway knows, or `png`, a `fragment_size`, or `cbor-raw` on the
//!   typed topic, `model/encodings.rs` `CBOR_RAW`): it is
//!   owed exactly the plain subscriber's messages under the same rules,
//!   each made as the protocol page says (one binary frame, a `png` frame,
//!   `fragment` frames numbered from 1), whose decoded content is the JSON
//!   publish; requests may come as `fragment` pieces, valid (the request's
//!   effect) or malformed (an error status with the pieces' id, nothing
//!   delivered);
//! - for Foxglove sessions (WebSocket clients opening with the
//!   `foxglove.websocket.v1` subprotocol, `driver/foxglove.rs`): the
//!   typed topic's channel the hub advertises and unadvertises, in order,
//!   a subscription to it (a registration in the encoding
//!   `Foxglove(sub)`, withdrawn by `unsubscribe` or with its channel), owed
//!   exactly a plain subscriber's messages as message data whose CDR
//!   decodes to the JSON publish; a `json` or `cdr` client channel on it,
//!   whose messages are the connection's publishes;
//! - for WebSocket clients, the handshake answer (101 with the right
//!   accept key, or the HTTP refusal), one text frame per line carrying
//!   exactly its bytes, a pong per ping, and the close frame (echoed, or
//!   1002 after a protocol violation) as the last thing sent;
//! - the bounds on memory and work (P17-P23): which connections have not
//!   completed their opening (TCP: no whole line yet; WebSocket: no
//!   upgrade) and so which one is evicted for a newcomer at the
//!   connection limit; when the periodic sweep runs and whom it closes,
//!   for which reason (write stall, slow consumer, opening, partial
//!   request, idle, in that precedence), from the model's own clocks;
//!   which registrations a per-connection limit refuses; which requests
//!   the per-item caps refuse, with or without their id; what the memory
//!   budget sheds and whom it closes, by re-running its rule; and, at a
//!   shutdown, every call failed, the 1001 goodbye after each WebSocket
//!   client's output, input ignored and each connection closed once
//!   drained.
//!
//! Clients also serve actions and send goals (`driver/goals.rs`), state
//! QoS on their registrations (`driver/qos.rs`), and declare, set, read,
//! validate and watch parameters (`driver/params.rs`,
//! `driver/param_access.rs`): owners declare their nodes' parameters
//! (types, descriptors with ranges, read-only, dynamic typing, validation)
//! and change or withdraw them; others read and change them through rosapi
//! and the node services, within the rules and the byte limits (a
//! connection's parameters together, the gateway's held ones in all
//! domains; the changes of one request together), held by
//! the gateway for nodes nobody owns; validating owners accept, refuse or
//! stay silent; a node's parameters go with it; every change is an event
//! on `/parameter_events` of its domain. The model predicts every answer,
//! validation call and event (exact bytes), and the hub's stores after
//! every step.
//!
//! Every hub call is accounted for right after it
//! (`driver/accounting.rs`): each queue changed by the frames delivered
//! less the frames shed, and the frames shed are identified (the queue is
//! read back), so a client must receive exactly the others; every close
//! has a reason the model
//! predicted or allows then, and every predicted close happens. After
//! every step the hub's tables (router topics and services of every
//! domain in use, per connection indexes and domains, the node table,
//! which node made each registration, gauges) and its memory ledger
//! (distinct shared frames, control, partial input, calls, registrations,
//! declared nodes and parameters, each connection's own included, as
//! `docs/limits.md` states them) must equal the
//! model's, and the counters of closes, refusals, cap, name and node
//! errors and drops must agree with it. Domains are isolated by
//! construction: a publish is queued, and a call forwarded, only within
//! its domain, and anything delivered elsewhere is a line nobody owes.

mod actions;
mod driver;
mod link;
mod model;
mod names;
mod rng;
mod violation;
mod ws;
mod ws_decode;

pub mod binary;
pub mod foxglove;
pub mod fuzzing;
pub mod scan_parity;

pub use actions::{
    actions_from_bytes, actions_to_bytes, Action, GoalReq, NamedReq, ParamReq, QosReq, Req,
    SimConfig, ACTIONS, ACTION_KINDS, DOMAIN_FIELDS, MAX_CLIENTS, NAMES, NAMESPACES, NODE_NAMES,
    REMAPS, SERVICES, TOPICS,
};
pub use driver::{run_seed, Counts, Sim};
pub use link::{run_link_bytes, run_link_seed, LinkCounts};
pub use rng::{Bytes, Rng};
pub use violation::Violation;
