// rosgate dashboard: plain JavaScript, no dependencies, served by the
// gateway itself. It speaks rosbridge v2 JSON over the WebSocket of the
// port it was loaded from (ws://<same host>/, `?domain=N` passed on) and
// shows only what any client may ask the gateway for.
//
// Where each part of the page comes from:
//
// - The graph (topics, nodes, services, actions, parameters): a rosapi
//   snapshot at each (re)connection (topics, nodes, node_details,
//   services, action_servers, get_param_names...), then the change events
//   of /rosgate/graph and /parameter_events. No polling of the graph; a
//   `"resync": true` graph message (more than 1000 changes in one turn)
//   triggers a fresh snapshot.
// - Every 2 s, while the tab is visible, three built-in services are read
//   together:
//   - /rosgate/stats: gateway-wide counters and gauges (rates are deltas
//     between two reads; uptime from `start_time_seconds`);
//   - /rosgate/topic_stats: each topic's `published` / `published_bytes`
//     counters. The rate and bandwidth of EVERY topic are the difference
//     between replies over a sliding window of about 4 s: the page
//     subscribes to nothing to measure them. A counter that goes down
//     means the topic disappeared and came back (it restarts from 0): its
//     window starts over;
//   - /rosgate/tf_frames: the domain's TF tree (each frame's parent, static
//     or its rate); the card shows only when there are frames. The page
//     holds no TF subscription, so dynamic frames show while some TF
//     client exists (the gateway reads /tf only then, docs/tf.md);
//   - /rosgate/connections: the open connections of every domain (peer
//     ip:port, transport, declared nodes, queued bytes, messages delivered
//     and dropped, age) and the last closes with their reason, so a page
//     opened late still shows what closed before it. It is also re-read
//     shortly after graph events about clients and nodes
//     (client_connected/disconnected, node_added/removed), at most every
//     500 ms.
// - /rosout: the log, as it comes.
//
// Subscriptions to application topics: only to show the last message of a
// topic the user opens (a click on its row), at most 8 at once (opening a
// 9th closes the oldest), all withdrawn while the tab is hidden. They are
// plain subscriptions (no QoS, throttle_rate or queue_length: any of those
// would take the topic off the gateway's fast path for everyone) and the
// messages are not parsed on arrival (the topic name is read from the
// frame's fixed prefix; the last one is parsed when shown). A topic that
// /rosgate/topic_stats says is heavy (over 2 MiB/s or 2000 msg/s) is not
// streamed: the page takes one message every 5 s (subscribe, first
// message, unsubscribe). If the browser falls behind anyway, the gateway's
// per-connection limit (--max-queue-bytes, oldest first) protects it.
//
// The page declares no node: its subscriptions belong to its connection's
// implicit name (/rosgate_ws_<n>), which it learns from the graph event
// of a subscription to a hidden marker topic.
(() => {
  'use strict';

  const CFG = {
    periodMs: 2000,           // stats, topic_stats and connections
    rateWindowMs: 4500,       // topic rates: replies this recent are diffed
    connsDelayMs: 150,        // connections re-read after a client/node event...
    connsMinGapMs: 500,       // ...but not more often than this
    maxOpen: 8,
    heavyBytesPerSec: 2 * 1024 * 1024,
    heavyMsgsPerSec: 2000,
    snapshotEveryMs: 5000,
    snapshotWaitMs: 3000,
    callTimeoutMs: 10000,
    concurrency: 8,
    rosoutKept: 300,
    feedKept: 120,
    historyPoints: 90,
    topicHistoryPoints: 45,
    maxRows: 300,
    maxParamValues: 500,
    previewChars: 2000,
  };

  const GATEWAY_TOPICS = new Set(['/client_count', '/connected_clients', '/parameter_events', '/rosout', '/rosgate/graph']);
  const PARAM_SERVICE_SUFFIXES = ['/describe_parameters', '/get_parameter_types', '/get_parameters',
    '/list_parameters', '/set_parameters', '/set_parameters_atomically'];
  const NORMAL_CLOSES = new Set(['peer_closed', 'http_served', 'shutdown', 'domain_changed']);
  const CLIENT_EVENTS = new Set(['client_connected', 'client_disconnected', 'node_added', 'node_removed']);
  const CONN_NODE = /^\/rosgate_(tcp|ws)_(\d+)$/;
  const LEVELS = { 10: 'debug', 20: 'info', 30: 'warn', 40: 'error', 50: 'fatal' };
  const PARAM_TYPES = ['unset', 'bool', 'integer', 'double', 'string', 'byte[]', 'bool[]', 'integer[]', 'double[]', 'string[]'];
  const PARAM_FIELDS = [null, 'bool_value', 'integer_value', 'double_value', 'string_value', 'byte_array_value',
    'bool_array_value', 'integer_array_value', 'double_array_value', 'string_array_value'];

  // ------------------------------------------------------------ helpers

  const $ = (id) => document.getElementById(id);
  const ESC = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
  const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ESC[c]);
  const now = () => performance.now();
  const plural = (n, one, many) => `${n} ${n === 1 ? one : (many || one + 's')}`;

  function fmtBytes(n) {
    if (n == null || !isFinite(n)) return '–';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (Math.abs(n) >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return `${i === 0 ? Math.round(n) : n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : n.toFixed(0)} ${u[i]}`;
  }
  function fmtNum(n) {
    if (n == null || !isFinite(n)) return '–';
    if (Math.abs(n) >= 1e9) return (n / 1e9).toFixed(2) + 'G';
    if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(2) + 'M';
    if (Math.abs(n) >= 1e4) return (n / 1e3).toFixed(1) + 'k';
    return String(Math.round(n));
  }
  function fmtHz(hz) {
    if (hz == null || !isFinite(hz)) return '–';
    if (hz === 0) return '0 Hz';
    if (hz >= 1000) return (hz / 1000).toFixed(2) + ' kHz';
    return (hz >= 100 ? hz.toFixed(0) : hz >= 10 ? hz.toFixed(1) : hz.toFixed(2)) + ' Hz';
  }
  function fmtPerSec(n) { return n == null ? '–' : fmtNum(n < 10 && n > 0 ? Math.round(n * 10) / 10 : n) + '/s'; }
  function fmtDur(ms) {
    if (ms == null || !isFinite(ms)) return '–';
    let s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return `${s}s`;
    let m = Math.floor(s / 60); s %= 60;
    if (m < 60) return `${m}m ${String(s).padStart(2, '0')}s`;
    let h = Math.floor(m / 60); m %= 60;
    if (h < 24) return `${h}h ${String(m).padStart(2, '0')}m`;
    const d = Math.floor(h / 24); h %= 24;
    return `${d}d ${h}h`;
  }
  function fmtClock(epochMs) {
    const d = new Date(epochMs);
    return d.toLocaleTimeString([], { hour12: false }) + '.' + String(d.getMilliseconds()).padStart(3, '0').slice(0, 1);
  }
  const stampMs = (t) => (t?.sec || 0) * 1000 + (t?.nanosec || 0) / 1e6;
  // The gateway's wall clock now, in ms (the browser's clock may be off).
  const serverNow = () => Date.now() + S.clockOffsetMs;
  const isHidden = (name) => String(name).split('/').some((t) => t.startsWith('_'));
  // The gateway's own: rosapi, /rosgate/*, parameter services, and TF's
  // /republish_tfs (docs/tf.md; served by the gateway unless a client does).
  const isSystemService = (s) => s.startsWith('/rosapi/') || s.startsWith('/rosgate/') ||
    s === '/republish_tfs' || PARAM_SERVICE_SUFFIXES.some((x) => s.endsWith(x));
  const randomToken = () => Array.from(crypto.getRandomValues(new Uint8Array(6)), (b) => b.toString(16).padStart(2, '0')).join('');

  // Runs `fn` over `items`, at most `n` at a time (initial snapshots can
  // need one rosapi call per node; they must not arrive as one burst).
  async function pool(items, n, fn) {
    const out = new Array(items.length);
    let next = 0;
    const worker = async () => {
      while (next < items.length) {
        const i = next++;
        try { out[i] = await fn(items[i], i); } catch (e) { out[i] = undefined; }
      }
    };
    await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
    return out;
  }

  // ------------------------------------------------------------ state

  const S = {
    live: false,
    epoch: 0,                 // bumped on each (re)connection
    self: null,               // our own client name (/rosgate_ws_N)
    marker: null,             // hidden topic used to learn `self`
    resyncing: false,
    buffered: [],             // graph events that arrived during a snapshot
    topics: new Map(),        // name -> {name, type, pubs:Set, subs:Set}
    services: new Map(),      // name -> {name, type, node}
    actions: new Map(),       // name -> {name, type, node}
    declared: new Set(),      // declared nodes (+ /rosgate)
    params: new Map(),        // "node:name" -> {key, node, name, type, value, changedAt}
    paramsTruncated: 0,
    flow: new Map(),          // topic -> {samples:[[t, msgs, bytes]], hz, bps, hist, total}
    flowAt: 0,
    conns: null,              // the last /rosgate/connections reply (+ derived fields)
    fed: null,                // the last /rosgate/federation reply
    tf: null,                 // the last /rosgate/tf_frames reply
    fedSig: null,             // its graphs, to notice a change
    connRates: new Map(),     // connection key -> {t, delivered, rate}
    clockOffsetMs: 0,         // gateway wall clock - browser wall clock
    startedAt: null,          // gateway start, epoch ms (its clock)
    rosout: [],
    feed: [],
    stats: null,
    statsAt: 0,
    rates: null,              // per-second deltas of the last two stats reads
    history: { published: [], delivered: [], bytesIn: [], bytesOut: [] },
    open: new Map(),          // topic -> Viewer (opened rows, last message)
    topicInfo: new Map(),
    sort: 'name',
    filter: '',
    showSystem: false,
    logLevel: 0,
  };

  // ------------------------------------------------------------ rosbridge

  const PUBLISH_PREFIX = '{"op":"publish","topic":"';

  class Bridge {
    constructor() {
      this.ws = null;
      this.seq = 0;
      this.pending = new Map();
      this.backoff = 500;
      this.handlers = {};
    }
    url() {
      const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
      const q = new URLSearchParams(location.search);
      const keep = new URLSearchParams();
      if (q.get('domain')) keep.set('domain', q.get('domain'));
      // With authentication on, the page is opened as /?token=... and hands
      // the token to its WebSocket (browsers cannot set headers on one).
      if (q.get('token')) keep.set('token', q.get('token'));
      const qs = keep.toString();
      return `${proto}//${location.host}/${qs ? '?' + qs : ''}`;
    }
    connect() {
      setStatus('connecting', 'connecting…');
      let ws;
      try { ws = new WebSocket(this.url()); } catch (e) { this.retry(); return; }
      this.ws = ws;
      ws.onopen = () => { this.backoff = 500; this.handlers.open?.(); };
      ws.onmessage = (e) => this.frame(e.data);
      ws.onclose = () => {
        if (this.ws !== ws) return;
        this.ws = null;
        for (const [, p] of this.pending) { clearTimeout(p.timer); p.reject(new Error('connection closed')); }
        this.pending.clear();
        this.handlers.close?.();
        this.retry();
      };
    }
    retry() {
      const wait = this.backoff;
      this.backoff = Math.min(this.backoff * 2, 10000);
      setStatus('offline', `disconnected, retrying in ${Math.round(wait / 1000)}s`);
      setTimeout(() => this.connect(), wait);
    }
    send(obj) {
      if (this.ws && this.ws.readyState === 1) this.ws.send(JSON.stringify(obj));
    }
    call(service, args = {}) {
      return new Promise((resolve, reject) => {
        if (!this.ws || this.ws.readyState !== 1) { reject(new Error('not connected')); return; }
        const id = `dash-${++this.seq}`;
        const timer = setTimeout(() => { this.pending.delete(id); reject(new Error(`${service} timed out`)); }, CFG.callTimeoutMs);
        this.pending.set(id, { resolve, reject, timer, service });
        this.send({ op: 'call_service', service, args, id });
      });
    }
    subscribe(topic) { this.send({ op: 'subscribe', topic }); }
    unsubscribe(topic) { this.send({ op: 'unsubscribe', topic }); }
    frame(data) {
      // Fast path: a message of an opened topic is kept as text, not parsed.
      if (typeof data === 'string' && data.startsWith(PUBLISH_PREFIX)) {
        const end = data.indexOf('"', PUBLISH_PREFIX.length);
        if (end > 0) {
          const topic = data.slice(PUBLISH_PREFIX.length, end);
          const v = S.open.get(topic);
          if (v && !topic.includes('\\')) {
            v.record(data);
            if (!GATEWAY_TOPICS.has(topic)) return;
          }
        }
      }
      let msg;
      try { msg = JSON.parse(data); } catch (e) { return; }
      if (msg.op === 'publish') this.handlers.publish?.(msg.topic, msg.msg);
      else if (msg.op === 'service_response') {
        const p = this.pending.get(msg.id);
        if (!p) return;
        this.pending.delete(msg.id);
        clearTimeout(p.timer);
        if (msg.result === false) p.reject(new Error(typeof msg.values === 'string' ? msg.values : `${p.service} failed`));
        else p.resolve(msg.values ?? {});
      } else if (msg.op === 'status') this.handlers.status?.(msg);
    }
  }

  const bridge = new Bridge();

  // ------------------------------------------------------------ opened topics

  // An opened topic: its last message, streamed ("stream") or, for a heavy
  // topic, taken once every snapshotEveryMs ("snapshot": subscribe, keep
  // the first message, unsubscribe). A topic whose rate is not known yet
  // starts with a snapshot; the next rates decide.
  class Viewer {
    constructor(topic) {
      this.topic = topic;
      this.mode = 'snapshot';
      this.subscribed = false;
      this.lastRaw = null;
      this.lastAt = null;         // performance.now() of the last message
      this.timer = null;
      const f = S.flow.get(topic);
      if (f && f.hz != null) this.mode = isHeavy(f) ? 'snapshot' : 'stream';
    }
    sub() {
      if (this.subscribed) return;
      // The gateway's own topics are subscribed to anyway.
      if (!GATEWAY_TOPICS.has(this.topic)) bridge.subscribe(this.topic);
      this.subscribed = true;
    }
    unsub() {
      if (!this.subscribed) return;
      if (!GATEWAY_TOPICS.has(this.topic)) bridge.unsubscribe(this.topic);
      this.subscribed = false;
    }
    resume() {
      if (document.hidden || !S.live) return;
      if (this.mode === 'stream') this.sub(); else if (!this.timer && !this.subscribed) this.snap();
    }
    pause() {
      clearTimeout(this.timer);
      this.timer = null;
      this.unsub();
    }
    snap() {
      clearTimeout(this.timer);
      this.sub();
      // Nothing came (no publisher, or a quiet one): try again later.
      this.timer = setTimeout(() => { this.unsub(); this.later(); }, CFG.snapshotWaitMs);
    }
    later() {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => { this.timer = null; if (!document.hidden && S.live) this.snap(); }, CFG.snapshotEveryMs);
    }
    record(raw) {
      this.lastRaw = raw;
      this.lastAt = now();
      if (this.mode === 'snapshot' && this.subscribed) { this.unsub(); this.later(); }
    }
    // Called with each new rate: heavy topics are not streamed.
    judge(f) {
      if (f.hz == null) return;
      const heavy = this.mode === 'snapshot'
        ? f.bps > CFG.heavyBytesPerSec / 2 || f.hz > CFG.heavyMsgsPerSec / 2
        : isHeavy(f);
      const mode = heavy ? 'snapshot' : 'stream';
      if (mode === this.mode) return;
      this.mode = mode;
      if (mode === 'stream') { this.pause(); this.resume(); } else { this.unsub(); this.later(); }
      scheduleRender('topics');
    }
  }
  const isHeavy = (f) => f.bps > CFG.heavyBytesPerSec || f.hz > CFG.heavyMsgsPerSec;

  function loadOpened() {
    try { return JSON.parse(localStorage.getItem('rosgate.watch') || '[]').filter((x) => typeof x === 'string'); } catch (e) { return []; }
  }
  function saveOpened() {
    try { localStorage.setItem('rosgate.watch', JSON.stringify([...S.open.keys()])); } catch (e) { /* private mode */ }
  }

  function openTopic(topic) {
    if (S.open.has(topic)) return;
    const v = new Viewer(topic);
    S.open.set(topic, v);
    if (S.open.size > CFG.maxOpen) {
      const oldest = S.open.keys().next().value;
      closeTopic(oldest);
      toast(`At most ${CFG.maxOpen} topics are open at once: closed ${oldest}`);
    }
    v.resume();
    refreshTopicInfo(topic);
    saveOpened();
    scheduleRender('topics');
  }
  function closeTopic(topic) {
    const v = S.open.get(topic);
    if (v) { v.pause(); S.open.delete(topic); }
    S.topicInfo.delete(topic);
    saveOpened();
    scheduleRender('topics');
  }

  // /rosgate/topic_info for an open topic, at most one call in flight each
  // and re-read only when the graph says its endpoints changed.
  const infoDue = new Map();
  function refreshTopicInfo(topic) {
    if (!S.open.has(topic) || infoDue.has(topic)) return;
    infoDue.set(topic, setTimeout(async () => {
      try {
        const info = await bridge.call('/rosgate/topic_info', { topic });
        if (S.open.has(topic)) { S.topicInfo.set(topic, info); scheduleRender('topics'); }
      } catch (e) { /* the next change retries */ }
      infoDue.delete(topic);
    }, 200));
  }

  // ------------------------------------------------------------ graph model

  function topicOf(name, type) {
    let t = S.topics.get(name);
    if (!t) { t = { name, type: type || '', pubs: new Set(), subs: new Set() }; S.topics.set(name, t); }
    if (type && !t.type) t.type = type;
    return t;
  }
  function dropIfEmpty(name) {
    const t = S.topics.get(name);
    if (t && !t.pubs.size && !t.subs.size && !GATEWAY_TOPICS.has(name)) S.topics.delete(name);
  }

  function applyEvent(ev) {
    const node = ev.node;
    switch (ev.event) {
      case 'node_added': S.declared.add(node); break;
      case 'node_removed': S.declared.delete(node); break;
      case 'publisher_added': topicOf(ev.topic, ev.type).pubs.add(node); break;
      case 'subscriber_added':
        if (ev.topic === S.marker) { learnSelf(node); return false; }
        topicOf(ev.topic, ev.type).subs.add(node); break;
      case 'publisher_removed': S.topics.get(ev.topic)?.pubs.delete(node); dropIfEmpty(ev.topic); break;
      case 'subscriber_removed':
        if (ev.topic === S.marker) return false;
        S.topics.get(ev.topic)?.subs.delete(node); dropIfEmpty(ev.topic); break;
      case 'service_added': case 'service_replaced': case 'action_added': case 'action_replaced': {
        const map = ev.event.startsWith('service') ? S.services : S.actions;
        const name = ev.service ?? ev.action;
        const cur = map.get(name) || { name, type: '', node: '' };
        cur.node = node;
        if (ev.type) cur.type = ev.type;
        map.set(name, cur);
        break;
      }
      case 'service_removed': case 'action_removed': {
        const map = ev.event.startsWith('service') ? S.services : S.actions;
        const name = ev.service ?? ev.action;
        const cur = map.get(name);
        if (cur && (!cur.node || cur.node === node)) map.delete(name);
        break;
      }
      default: break;
    }
    if (CLIENT_EVENTS.has(ev.event)) scheduleConns();
    if (ev.topic && S.open.has(ev.topic)) refreshTopicInfo(ev.topic);
    return true;
  }

  function onGraph(msg) {
    const events = Array.isArray(msg?.events) ? msg.events : [];
    if (S.resyncing) { S.buffered.push(...events); if (msg.resync) S.resyncAgain = true; return; }
    for (const ev of events) {
      if (applyEvent(ev) !== false) addFeed(ev);
    }
    if (msg.resync) { addFeed({ event: 'resync', note: 'more than 1000 changes in one turn: re-reading the graph' }); resync(); scheduleConns(); }
    scheduleRender('all');
  }

  function addFeed(ev) {
    if ((ev.topic && isHidden(ev.topic)) || (ev.service && isHidden(ev.service))) return;
    S.feed.unshift({ at: Date.now(), ev });
    S.feed.length = Math.min(S.feed.length, CFG.feedKept);
  }

  function learnSelf(node) {
    if (S.self) return;
    S.self = node;
    bridge.unsubscribe(S.marker);
    scheduleRender('conns');
  }

  // A snapshot of the graph from rosapi. Graph events arriving meanwhile
  // are kept and replayed on top (each event states the final state of its
  // key, so replaying them in order converges).
  async function resync() {
    if (S.resyncing) { S.resyncAgain = true; return; }
    S.resyncing = true;
    S.buffered = [];
    const epoch = S.epoch;
    try {
      const call = (s, a) => bridge.call(s, a);
      const [tp, nd, sv, ac, pn] = await Promise.all([
        call('/rosapi/topics'), call('/rosapi/nodes'), call('/rosapi/services'),
        call('/rosapi/action_servers').catch(() => ({ action_servers: [] })),
        call('/rosapi/get_param_names').catch(() => ({ names: [] })),
      ]);
      if (epoch !== S.epoch) return;
      const topics = new Map();
      (tp.topics || []).forEach((name, i) => topics.set(name, { name, type: (tp.types || [])[i] || '', pubs: new Set(), subs: new Set() }));
      const nodes = nd.nodes || [];
      const details = await pool(nodes, CFG.concurrency, (n) => call('/rosapi/node_details', { node: n }));
      const services = new Map();
      for (const name of sv.services || []) services.set(name, { name, type: '', node: '' });
      nodes.forEach((n, i) => {
        const d = details[i];
        if (!d) return;
        for (const t of d.publishing || []) (topics.get(t) || topics.set(t, { name: t, type: '', pubs: new Set(), subs: new Set() }).get(t)).pubs.add(n);
        for (const t of d.subscribing || []) (topics.get(t) || topics.set(t, { name: t, type: '', pubs: new Set(), subs: new Set() }).get(t)).subs.add(n);
        for (const s of d.services || []) { const e = services.get(s); if (e) e.node = n; }
      });
      // Service types: only the application's (the system ones are known).
      const appServices = [...services.values()].filter((s) => !isSystemService(s.name));
      await pool(appServices, CFG.concurrency, async (s) => { s.type = (await call('/rosapi/service_type', { service: s.name })).type || ''; });
      const actions = new Map();
      // The gateway names each action's server in `nodes` (same order),
      // as action_added events do; plain rosapi names none.
      const actionNodes = ac.nodes || [];
      await pool(ac.action_servers || [], CFG.concurrency, async (a, i) => {
        const ty = (await call('/rosapi/action_type', { action: a })).type || '';
        actions.set(a, { name: a, type: ty, node: actionNodes[i] || '' });
      });
      const names = pn.names || [];
      const params = new Map();
      S.paramsTruncated = Math.max(0, names.length - CFG.maxParamValues);
      await pool(names.slice(0, CFG.maxParamValues), CFG.concurrency, async (full) => {
        const r = await call('/rosapi/get_param', { name: full });
        const { node, name } = splitParam(full);
        params.set(full, { key: full, node, name, ...paramText(r.value), changedAt: 0 });
      });
      if (epoch !== S.epoch) return;
      S.topics = topics;
      S.services = services;
      S.actions = actions;
      S.declared = new Set(nodes.filter((n) => !CONN_NODE.test(n)));
      S.params = params;
    } catch (e) {
      if (epoch === S.epoch && S.live) toast(`Could not read the graph: ${e.message}`);
    } finally {
      S.resyncing = false;
      const buffered = S.buffered;
      S.buffered = [];
      for (const ev of buffered) if (applyEvent(ev) !== false) addFeed(ev);
      for (const t of S.open.keys()) refreshTopicInfo(t);
      scheduleRender('all');
      if (S.resyncAgain) { S.resyncAgain = false; if (epoch === S.epoch) resync(); }
    }
  }

  // ------------------------------------------------------------ parameters

  function splitParam(full) {
    const i = full.indexOf(':');
    return i < 0 ? { node: '', name: full } : { node: full.slice(0, i), name: full.slice(i + 1) };
  }
  // A value as rosapi's get_param gives it: JSON text. The gateway types a
  // number written with a fraction or an exponent as a double and writes
  // doubles so (docs/protocol.md, "Values"), but JSON.parse reads `1.0` as
  // 1: the type comes from the text. The text of a number or of a list of
  // numbers holds nothing else a `.` or an `e` could belong to.
  function paramText(text) {
    let v;
    try { v = JSON.parse(text); } catch (e) { return { type: '', value: String(text) }; }
    const numbers = typeof v === 'number' || (Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'number'));
    const type = numbers && /[.eE]/.test(text) ? (Array.isArray(v) ? 'double[]' : 'double') : jsonType(v);
    return { type, value: showParam(type, v) };
  }
  function jsonType(v) {
    if (typeof v === 'boolean') return 'bool';
    if (typeof v === 'number') return 'integer';
    if (typeof v === 'string') return 'string';
    if (Array.isArray(v)) return v.length ? jsonType(v[0]) + '[]' : '[]';
    return v === null ? 'unset' : 'object';
  }
  // A double keeps its decimal point (JSON.stringify(1.0) is "1").
  function showParam(type, v) {
    const dbl = (x) => (Number.isInteger(x) && Math.abs(x) < 1e21 ? x.toFixed(1) : JSON.stringify(x));
    if (type === 'double' && typeof v === 'number') return dbl(v);
    if (type === 'double[]' && Array.isArray(v)) return `[${v.map(dbl).join(',')}]`;
    return JSON.stringify(v);
  }
  function paramValue(pv) {
    const type = Number(pv?.type) || 0;
    const f = PARAM_FIELDS[type];
    const name = PARAM_TYPES[type] || String(type);
    return { type: name, value: f ? showParam(name, pv[f]) : '' };
  }
  function onParameterEvent(ev) {
    const node = ev?.node || '';
    const key = (name) => (node ? `${node}:${name}` : name);
    const t = Date.now();
    for (const p of [...(ev.new_parameters || []), ...(ev.changed_parameters || [])]) {
      const { type, value } = paramValue(p.value);
      S.params.set(key(p.name), { key: key(p.name), node, name: p.name, type, value, changedAt: t });
    }
    for (const p of ev.deleted_parameters || []) S.params.delete(key(p.name));
    scheduleRender('params');
  }

  // ------------------------------------------------------------ rosout

  function onRosout(m) {
    S.rosout.unshift({ at: stampMs(m?.stamp), level: Number(m?.level) || 0, name: m?.name || '', msg: m?.msg ?? '' });
    S.rosout.length = Math.min(S.rosout.length, CFG.rosoutKept);
    scheduleRender('log');
  }

  // ------------------------------------------------------------ polling

  // Every periodMs while the tab is visible: stats, topic counters and
  // connections, asked together; each figure is stamped on arrival.
  let pollBusy = false;
  async function poll() {
    if (pollBusy || !S.live || document.hidden) return;
    pollBusy = true;
    const epoch = S.epoch;
    const stamped = (p) => p.then((v) => [v, now()]);
    const [st, ts, , fed, tf] = await Promise.allSettled([
      stamped(bridge.call('/rosgate/stats')),
      stamped(topicStatsWalk()),
      refreshConns(true),
      bridge.call('/rosgate/federation'),
      bridge.call('/rosgate/tf_frames'),
    ]);
    pollBusy = false;
    if (epoch !== S.epoch) return;
    if (st.status === 'fulfilled') onStats(...st.value);
    if (ts.status === 'fulfilled') onTopicStats(...ts.value);
    if (fed.status === 'fulfilled') onFederation(fed.value);
    if (tf.status === 'fulfilled') { S.tf = tf.value; scheduleRender('tf'); }
  }

  // /rosgate/topic_stats answers a page (1000 topics) at a time: follow
  // `next` for up to 10 pages, as one reply.
  async function topicStatsWalk() {
    const topics = [];
    let args = {};
    for (let page = 0; page < 10; page++) {
      const r = await bridge.call('/rosgate/topic_stats', args);
      topics.push(...(r?.topics || []));
      if (!r?.next) return { topics, truncated: !!r?.truncated };
      args = { after: r.next };
    }
    return { topics, truncated: true };
  }

  // /rosgate/federation: the other gateways and their graphs. Their nodes
  // and topics reach rosapi's lists, not this page's graph events: a change
  // in them asks for a resync.
  function onFederation(r) {
    const sig = JSON.stringify((r.graphs || []).map((g) => [g.gateway, g.nodes, g.topics]));
    const changed = S.fed && S.fedSig !== sig;
    S.fed = r;
    S.fedSig = sig;
    if (changed) resync();
    scheduleRender('gateways');
  }

  function onStats(st, t) {
    if (S.stats && t > S.statsAt) {
      const dt = (t - S.statsAt) / 1000;
      const d = (k) => Math.max(0, ((st[k] ?? 0) - (S.stats[k] ?? 0)) / dt);
      S.rates = { published: d('published'), delivered: d('delivered'), bytesIn: d('bytes_in'), bytesOut: d('bytes_out'), dropped: d('dropped'), errors: d('errors_total') };
      for (const k of Object.keys(S.history)) {
        S.history[k].push(S.rates[k]);
        if (S.history[k].length > CFG.historyPoints) S.history[k].shift();
      }
    }
    S.stats = st;
    S.statsAt = t;
    if (st.start_time_seconds) S.startedAt = st.start_time_seconds * 1000;
    tickUptime();
    scheduleRender('kpis');
    scheduleRender('health');
  }

  // Rates from the published counters: the difference between the oldest
  // and the newest reply of the last rateWindowMs. A counter lower than
  // before means the topic disappeared and came back: its window restarts.
  function onTopicStats(reply, t) {
    const seen = new Set();
    for (const e of Array.isArray(reply?.topics) ? reply.topics : []) {
      if (typeof e?.topic !== 'string') continue;
      seen.add(e.topic);
      let f = S.flow.get(e.topic);
      if (!f) { f = { samples: [], hz: null, bps: null, hist: [], total: 0, bytes: 0, pubs: 0 }; S.flow.set(e.topic, f); }
      const msgs = Number(e.published) || 0;
      const bytes = Number(e.published_bytes) || 0;
      const last = f.samples[f.samples.length - 1];
      if (last && (msgs < last[1] || bytes < last[2])) { f.samples = []; f.hist = []; }
      f.samples.push([t, msgs, bytes]);
      while (t - f.samples[0][0] > CFG.rateWindowMs) f.samples.shift();
      const a = f.samples[0];
      if (f.samples.length > 1) {
        const dt = (t - a[0]) / 1000;
        f.hz = (msgs - a[1]) / dt;
        f.bps = (bytes - a[2]) / dt;
        f.hist.push(f.hz);
        if (f.hist.length > CFG.topicHistoryPoints) f.hist.shift();
      } else { f.hz = null; f.bps = null; }
      f.total = msgs;
      f.bytes = bytes;
      f.pubs = Number(e.publishers) || 0;
      S.open.get(e.topic)?.judge(f);
    }
    for (const k of [...S.flow.keys()]) if (!seen.has(k)) S.flow.delete(k);
    S.flowAt = t;
    S.flowTruncated = !!reply?.truncated;
    // Sorted by rate, the order may change: rebuild; else update in place.
    if (S.sort === 'name') updateRateCells(); else scheduleRender('topics');
    scheduleRender('kpis');
  }

  // /rosgate/connections: at each poll, and soon after graph events about
  // clients and nodes (coalesced, at most every connsMinGapMs).
  let connsBusy = false, connsAgain = false, connsTimer = null, connsLastAt = -Infinity;
  function scheduleConns() {
    if (connsTimer || !S.live || document.hidden) return;
    const wait = Math.max(CFG.connsDelayMs, connsLastAt + CFG.connsMinGapMs - now());
    connsTimer = setTimeout(() => { connsTimer = null; refreshConns(false); }, wait);
  }
  async function refreshConns(periodic) {
    if (!S.live) return;
    if (connsBusy) { if (!periodic) connsAgain = true; return; }
    // An event-driven read just happened: the periodic one is not needed.
    if (periodic && now() - connsLastAt < CFG.periodMs / 2) return;
    connsBusy = true;
    connsLastAt = now();
    const epoch = S.epoch;
    try {
      const r = await bridge.call('/rosgate/connections');
      if (epoch === S.epoch) onConnections(r, now());
    } catch (e) { /* the next poll retries */ }
    connsBusy = false;
    if (connsAgain) { connsAgain = false; scheduleConns(); }
  }

  function onConnections(r, t) {
    const list = Array.isArray(r?.connections) ? r.connections : [];
    const closes = Array.isArray(r?.recent_closes) ? r.recent_closes : [];
    // A connection's opening time plus its age is the gateway's "now".
    const c0 = list.find((c) => c.opened && typeof c.age_s === 'number');
    if (c0) S.clockOffsetMs = stampMs(c0.opened) + c0.age_s * 1000 - Date.now();
    const rates = new Map();
    const byNode = new Map();
    for (const c of list) {
      c.nodes = Array.isArray(c.nodes) ? c.nodes : [];
      c.key = `${c.id}@${c.opened?.sec}.${c.opened?.nanosec}`;
      c.self = !!S.self && c.client === S.self;
      // Messages delivered per second, over at least 1.5 s.
      const d = Number(c.delivered) || 0;
      const prev = S.connRates.get(c.key);
      let cur = { t, delivered: d, rate: null };
      if (prev && d >= prev.delivered) {
        cur = t - prev.t >= 1500 ? { t, delivered: d, rate: ((d - prev.delivered) * 1000) / (t - prev.t) } : prev;
      }
      rates.set(c.key, cur);
      c.rate = cur.rate;
      for (const n of c.nodes) byNode.set(n, c);
      if (!c.nodes.length) byNode.set(c.client, c);
    }
    S.connRates = rates;
    const domains = new Set([...list, ...closes].map((c) => c.domain));
    S.conns = { list, closes, at: t, truncated: !!r?.truncated, byNode, multiDomain: domains.size > 1, domains: domains.size };
    scheduleRender('conns');
    scheduleRender('kpis');
    scheduleRender('nodes');
  }

  // ------------------------------------------------------------ connection lifecycle

  let restored = false;
  bridge.handlers.open = () => {
    S.epoch++;
    S.live = true;
    setStatus('live', 'live');
    S.self = null;
    S.stats = null;
    S.rates = null;
    S.flow = new Map();
    S.flowAt = 0;
    S.connRates = new Map();
    connsLastAt = -Infinity;
    S.marker = `/_rosgate_dashboard/probe_${randomToken()}`;
    // The graph first: from now on no change is missed; the snapshot
    // comes after, and the marker's own event names this connection.
    bridge.subscribe('/rosgate/graph');
    bridge.subscribe(S.marker);
    for (const t of ['/rosout', '/parameter_events']) bridge.subscribe(t);
    for (const v of S.open.values()) { v.subscribed = false; clearTimeout(v.timer); v.timer = null; v.resume(); }
    resync().then(() => {
      // Topics open before a reload, if they still exist (subscribing to a
      // vanished one would bring it back as an empty topic).
      if (restored) return;
      restored = true;
      for (const t of loadOpened()) if (S.topics.has(t) && !S.open.has(t) && S.open.size < CFG.maxOpen) openTopic(t);
    });
    poll();
  };
  bridge.handlers.close = () => {
    S.live = false;
    S.resyncing = false;
    for (const v of S.open.values()) { v.subscribed = false; clearTimeout(v.timer); v.timer = null; }
    scheduleRender('all');
  };
  bridge.handlers.publish = (topic, msg) => {
    switch (topic) {
      case '/rosgate/graph': onGraph(msg); break;
      case '/rosout': onRosout(msg); break;
      case '/parameter_events': onParameterEvent(msg); break;
      default: {
        // An opened topic whose name needed JSON escapes (the fast path
        // reads names verbatim).
        const v = S.open.get(topic);
        if (v && !GATEWAY_TOPICS.has(topic)) v.record(JSON.stringify({ op: 'publish', topic, msg }));
      }
    }
  };
  bridge.handlers.status = (m) => {
    if (m.level === 'error' || m.level === 'warning') addFeed({ event: 'status', note: `${m.level}: ${m.msg}` });
  };

  document.addEventListener('visibilitychange', () => {
    for (const v of S.open.values()) { if (document.hidden) v.pause(); else v.resume(); }
    if (!document.hidden) poll();
  });

  // ------------------------------------------------------------ rendering

  const dirty = new Set();
  let renderTimer = null;
  function scheduleRender(what) {
    dirty.add(what);
    if (renderTimer) return;
    renderTimer = setTimeout(() => { renderTimer = null; render(); }, 120);
  }

  function render() {
    const due = new Set(dirty);
    dirty.clear();
    const all = due.has('all');
    const want = (k) => all || due.has(k);
    if (want('kpis')) renderKpis();
    if (want('topics')) renderTopics();
    if (want('conns')) renderConns();
    if (want('log')) renderLog();
    if (all) { renderServices(); renderFeed(); }
    if (want('nodes')) renderNodes();
    if (want('gateways')) renderGateways();
    if (want('tf')) renderTf();
    if (want('params')) renderParams();
    if (want('health')) renderHealth();
  }

  function matches(...names) {
    if (!S.filter) return true;
    return names.some((n) => String(n || '').toLowerCase().includes(S.filter));
  }

  function userTopic(t) { return S.showSystem || (!GATEWAY_TOPICS.has(t.name) && !isHidden(t.name)); }

  function nodeChip(n) {
    const self = n === S.self;
    return `<span class="chip${self ? ' self' : ''}" title="${esc(n)}">${esc(self ? 'this page' : n)}</span>`;
  }
  function chips(set, max = 3) {
    const list = [...set].sort((a, b) => (a === S.self) - (b === S.self) || a.localeCompare(b));
    const shown = list.slice(0, max).map(nodeChip).join('');
    return shown + (list.length > max ? `<span class="more">+${list.length - max}</span>` : '');
  }

  function sparkline(values, cls, headroom = 1) {
    const w = 200, h = 32;
    if (!values || values.length < 2) return '';
    const max = Math.max(...values, 1e-9) * headroom;
    const step = w / (values.length - 1);
    const pts = values.map((v, i) => [i * step, h - 2 - (v / max) * (h - 4)]);
    const line = pts.map((p, i) => `${i ? 'L' : 'M'}${p[0].toFixed(1)},${p[1].toFixed(1)}`).join('');
    const area = `${line}L${pts[pts.length - 1][0].toFixed(1)},${h}L${pts[0][0].toFixed(1)},${h}Z`;
    return `<svg class="spark ${cls}" viewBox="0 0 ${w} ${h}" preserveAspectRatio="none" aria-hidden="true"><path class="area" d="${area}"/><path class="line" d="${line}"/></svg>`;
  }

  function kpi(label, value, sub, extra = '', cls = '') {
    return `<div class="kpi ${cls}" data-kpi="${label.toLowerCase()}"><div class="label">${label}</div><div class="value">${value}</div><div class="sub">${sub}</div>${extra}</div>`;
  }

  function renderKpis() {
    const st = S.stats || {};
    const r = S.rates;
    const userTopics = [...S.topics.values()].filter((t) => !GATEWAY_TOPICS.has(t.name) && !isHidden(t.name));
    const active = userTopics.filter((t) => S.flow.get(t.name)?.hz > 0).length;
    const userServices = [...S.services.keys()].filter((s) => !isSystemService(s)).length;
    const C = S.conns;
    const open = C ? C.list.length : st.connections_open;
    const count = (tr) => C.list.filter((c) => c.transport === tr).length;
    const opening = C ? C.list.filter((c) => c.established === false).length : 0;
    const fox = C ? count('foxglove') : 0;
    const connSub = C ? [`${count('tcp')} tcp · ${count('ws')} ws${fox ? ` · ${fox} foxglove` : ''}`, opening ? `${opening} opening` : '', C.domains > 1 ? `${C.domains} domains` : '']
      .filter(Boolean).join(' · ') : `${fmtNum(st.connections_accepted ?? 0)} accepted in all`;
    const mem = st.memory_bytes, budget = st.memory_budget_bytes;
    const memPct = budget ? Math.min(100, (100 * mem) / budget) : 0;
    const memCls = memPct > 85 ? 'bad' : memPct > 60 ? 'warn' : 'ok';
    const drops = r?.dropped || 0;
    const forced = Object.entries(st.closes || {}).filter(([k, v]) => v && !NORMAL_CLOSES.has(k)).reduce((a, [, v]) => a + v, 0);
    const nodes = allNodes().filter((n) => n !== '/rosgate' && n !== S.self).length;
    $('kpis').innerHTML = [
      kpi('Connections', fmtNum(open ?? 0), connSub),
      kpi('Topics', fmtNum(userTopics.length), `${S.flowAt ? `${active} active · ` : ''}${plural(st.subscriptions ?? 0, 'sub')}`),
      kpi('Nodes', fmtNum(nodes), `${plural(S.params.size, 'parameter')}`),
      kpi('Services', fmtNum(userServices), `${plural([...S.actions.values()].filter((a) => a.node !== '/rosgate').length, 'action')} · ${fmtNum(st.calls_pending ?? 0)} in flight`),
      kpi('Messages', r ? fmtPerSec(r.published) : '–', r ? `published · ${fmtPerSec(r.delivered)} out` : 'measuring…', sparkline(S.history.published, 'c1'), 'graph'),
      kpi('Bandwidth', r ? `${fmtBytes(r.bytesIn + r.bytesOut)}/s` : '–', r ? `${fmtBytes(r.bytesIn)} in · ${fmtBytes(r.bytesOut)} out` : 'measuring…', sparkline(S.history.bytesOut.map((v, i) => v + (S.history.bytesIn[i] || 0)), 'c2'), 'graph'),
      kpi('Memory', mem != null ? fmtBytes(mem) : '–', budget ? `${memPct < 0.1 && mem ? '<0.1' : memPct.toFixed(1)}% of ${fmtBytes(budget)}` : '&nbsp;',
        `<div class="bar ${memCls}"><span style="width:${Math.max(memPct, mem ? 1 : 0).toFixed(1)}%"></span></div>`),
      kpi('Drops', fmtNum(st.dropped ?? 0), drops ? `<b class="bad-text">${fmtPerSec(drops)} now</b>` : `${plural(forced, 'forced close')}`, '', drops ? 'alarm' : ''),
    ].join('');
  }

  // The rate and bandwidth cells of a topic, from /rosgate/topic_stats.
  function rateCells(topic) {
    const f = S.flow.get(topic);
    if (!f) {
      if (!S.flowAt) return ['<span class="muted">measuring…</span>', ''];
      return [`<span class="muted" title="${GATEWAY_TOPICS.has(topic) ? 'published by the gateway itself, not counted' : 'not listed by /rosgate/topic_stats yet'}">–</span>`, ''];
    }
    if (f.hz == null) return ['<span class="muted">measuring…</span>', ''];
    if (f.hz === 0 && !f.pubs) return ['<span class="muted">no publisher</span>', ''];
    const cls = f.hz > 0 ? 'rate' : 'rate zero';
    const heavy = isHeavy(f) ? ' heavy' : '';
    return [`<span class="${cls}" data-hz="${f.hz.toFixed(3)}">${fmtHz(f.hz)}</span>`,
      `<span class="bw${heavy}" data-bps="${f.bps.toFixed(1)}">${fmtBytes(f.bps)}/s</span>`];
  }

  function sortedTopics(rows) {
    const key = S.sort;
    const by = (t) => S.flow.get(t.name)?.[key] ?? -1;
    return rows.sort(key === 'name' ? (a, b) => a.name.localeCompare(b.name) : (a, b) => by(b) - by(a) || a.name.localeCompare(b.name));
  }

  function renderTopics() {
    const rows = sortedTopics([...S.topics.values()].filter((t) => userTopic(t) && matches(t.name, t.type)));
    $('topics-count').textContent = rows.length;
    if (!rows.length) {
      $('topics-body').innerHTML = `<div class="empty">${S.topics.size ? 'No topic matches.' : 'No topics yet.'}</div>`;
      return;
    }
    const shown = rows.slice(0, CFG.maxRows);
    const th = (key, label, cls = '') => `<th class="${cls} sortable${S.sort === key ? ' sorted' : ''}" data-sort="${key}" tabindex="0" aria-sort="${S.sort === key ? (key === 'name' ? 'ascending' : 'descending') : 'none'}">${label}</th>`;
    const html = [`<table class="tbl topics"><thead><tr><th class="caret"></th>${th('name', 'Topic')}<th>Publishers</th><th>Subscribers</th>${th('hz', 'Rate', 'num')}${th('bps', 'Bandwidth', 'num')}</tr></thead><tbody>`];
    for (const t of shown) {
      const v = S.open.get(t.name);
      const subs = new Set([...t.subs].filter((n) => n !== S.self));
      const [rate, bw] = rateCells(t.name);
      const warn = S.topicInfo.get(t.name)?.incompatible?.length ? ' <span class="badge bad" title="incompatible QoS pairs">QoS</span>' : '';
      html.push(`<tr class="topic${v ? ' open' : ''}" data-topic="${esc(t.name)}" tabindex="0" aria-expanded="${!!v}">
        <td class="caret">${v ? '▾' : '▸'}</td>
        <td><div class="name">${esc(t.name)}${warn}</div><div class="type">${esc(t.type || '—')}</div></td>
        <td><span class="n ${t.pubs.size ? '' : 'zero'}">${t.pubs.size}</span>${chips(t.pubs)}</td>
        <td><span class="n ${subs.size ? '' : 'zero'}">${subs.size}</span>${chips(subs)}${t.subs.has(S.self) && !GATEWAY_TOPICS.has(t.name) ? '<span class="chip self" title="this page subscribes to show the last message">+ this page</span>' : ''}</td>
        <td class="num" data-rate="${esc(t.name)}">${rate}</td><td class="num" data-bw="${esc(t.name)}">${bw}</td></tr>`);
      if (v) html.push(`<tr class="detail"><td></td><td colspan="5">${topicDetail(t)}</td></tr>`);
    }
    html.push('</tbody></table>');
    if (rows.length > shown.length) html.push(`<div class="empty">${rows.length - shown.length} more: refine the filter.</div>`);
    if (S.flowTruncated) html.push('<div class="note">/rosgate/topic_stats listed only the first 10 000 topics: the others show no rate.</div>');
    $('topics-body').innerHTML = html.join('');
  }

  // After each /rosgate/topic_stats reply: the figures, in place.
  function updateRateCells() {
    const body = $('topics-body');
    for (const rc of body.querySelectorAll('td[data-rate]')) {
      const topic = rc.dataset.rate;
      const [rate, bw] = rateCells(topic);
      rc.innerHTML = rate;
      const bc = rc.nextElementSibling;
      if (bc) bc.innerHTML = bw;
    }
    for (const el of body.querySelectorAll('[data-flow]')) el.innerHTML = flowHtml(el.dataset.flow);
  }

  function qosText(q) {
    if (!q) return '';
    const parts = [];
    if (q.reliability && q.reliability !== 'any') parts.push(q.reliability.replace('_', ' '));
    if (q.durability && q.durability !== 'any') parts.push(q.durability.replace('_', ' '));
    if (q.depth != null) parts.push(`depth ${q.depth}`);
    return parts.length ? parts.join(' · ') : 'default QoS';
  }

  // The rate history of an open topic and its totals.
  function flowHtml(topic) {
    const f = S.flow.get(topic);
    if (!f) return '<h4>Rate</h4><div class="muted">not counted</div>';
    const spark = f.hist.length > 1 ? sparkline(f.hist, 'c1', 1.25) : '<div class="muted spark-empty">collecting…</div>';
    return `<h4>Rate <span class="muted">last ${Math.round((f.hist.length * CFG.periodMs) / 1000)} s · ${fmtNum(f.total)} messages, ${fmtBytes(f.bytes)} since it appeared</span></h4><div class="flow">${spark}</div>`;
  }

  function topicDetail(t) {
    const info = S.topicInfo.get(t.name);
    const parts = ['<div class="detail-grid">'];
    const endpoint = (e, kind) => {
      const extra = [];
      if (kind === 'pub' && e.latched_messages) extra.push(`${e.latched_messages} latched`);
      if (kind === 'pub' && e.peers) extra.push('wants peer counts');
      if (kind === 'sub' && e.throttle_ms) extra.push(`throttle ${e.throttle_ms} ms`);
      if (kind === 'sub' && e.compression && e.compression !== 'none') extra.push(`compression ${e.compression}`);
      if (kind === 'sub' && e.fragment_size) extra.push(`fragments of ${e.fragment_size}`);
      return `<li>${nodeChip(e.node)} <span class="muted">${esc(qosText(e.qos))}${extra.length ? ' · ' + esc(extra.join(' · ')) : ''}</span></li>`;
    };
    if (info) {
      parts.push(`<div><h4>Publishers</h4><ul class="plain">${(info.publishers || []).map((e) => endpoint(e, 'pub')).join('') || '<li class="muted">none</li>'}</ul></div>`);
      parts.push(`<div><h4>Subscribers</h4><ul class="plain">${(info.subscribers || []).map((e) => endpoint(e, 'sub')).join('') || '<li class="muted">none</li>'}</ul></div>`);
      if (info.incompatible?.length) {
        parts.push(`<div class="span2 warnbox"><h4>Incompatible QoS (nothing is exchanged between these)</h4><ul class="plain">${info.incompatible.map((p) =>
          `<li>${nodeChip(p.publisher)} → ${nodeChip(p.subscriber)} <span class="muted">${esc(p.why)}</span></li>`).join('')}</ul></div>`);
      }
    } else parts.push('<div class="muted">reading /rosgate/topic_info…</div>');
    parts.push(`<div class="span2" data-flow="${esc(t.name)}">${flowHtml(t.name)}</div>`);
    parts.push(`<div class="span2" data-preview="${esc(t.name)}">${previewHtml(t.name)}</div>`);
    parts.push('</div>');
    return parts.join('');
  }

  // Indented JSON, with arrays of numbers, strings and booleans kept on one line.
  function prettyJson(v) {
    return JSON.stringify(v, null, 2).replace(/\[\n\s*((?:[^\[\]{}\n]+,\n\s*)*[^\[\]{}\n]+)\n\s*\]/g,
      (all, inner) => `[${inner.split(/,\n\s*/).join(', ')}]`);
  }

  // The last message of an open topic, parsed only here (at most every
  // 2 s), never on arrival.
  function previewHtml(topic) {
    const v = S.open.get(topic);
    let preview = `<span class="muted">${v?.mode === 'snapshot' && !v.lastRaw ? 'waiting for a message…' : 'no message received yet'}</span>`;
    if (v?.lastRaw) {
      let text = '';
      // A big message is shown as its first characters, not parsed.
      if (v.lastRaw.length > 256 * 1024) text = v.lastRaw.slice(0, CFG.previewChars);
      else try { text = prettyJson(JSON.parse(v.lastRaw).msg); } catch (e) { text = v.lastRaw; }
      if (text.length > CFG.previewChars) text = text.slice(0, CFG.previewChars) + `\n… (${fmtBytes(v.lastRaw.length)} in all)`;
      preview = `<pre>${esc(text)}</pre>`;
    }
    const age = v?.lastAt ? `${fmtDur(now() - v.lastAt)} ago` : '';
    const mode = v?.mode === 'snapshot'
      ? ` <span class="badge warn snapshot" title="over ${fmtBytes(CFG.heavyBytesPerSec)}/s or ${fmtNum(CFG.heavyMsgsPerSec)} msg/s: not streamed to this page">one every ${CFG.snapshotEveryMs / 1000} s</span>` : '';
    return `<h4>Last message <span class="muted">${age}</span>${mode}</h4>${preview}`;
  }

  // Every second: uptime; previews every other second, in place.
  let tickCount = 0;
  function tick() {
    tickUptime();
    if (++tickCount % 2) return;
    const body = $('topics-body');
    for (const topic of S.open.keys()) {
      const el = body.querySelector(`[data-preview="${CSS.escape(topic)}"]`);
      if (el && !el.contains(document.getSelection()?.anchorNode)) el.innerHTML = previewHtml(topic);
    }
  }
  function tickUptime() {
    const el = $('uptime');
    if (!S.startedAt) { el.textContent = ''; return; }
    el.textContent = `up ${fmtDur(serverNow() - S.startedAt)}`;
    el.title = `started ${new Date(S.startedAt).toLocaleString()}`;
  }

  function transportPill(tr) {
    const label = { ws: 'WebSocket', foxglove: 'Foxglove' }[tr] || String(tr).toUpperCase();
    return tr ? `<span class="pill ${esc(tr)}">${esc(label)}</span>` : '<span class="muted">–</span>';
  }
  function reasonPill(reason, forced) {
    const cls = forced ? 'bad' : reason === 'peer_closed' ? 'ok' : 'neutral';
    return `<span class="pill ${cls}"${forced ? ' title="closed by the gateway"' : ''}>${esc(String(reason || '?').replace(/_/g, ' '))}</span>`;
  }

  // Registrations per node, in one pass over the graph.
  function registrations() {
    const per = new Map();
    const get = (n) => { let r = per.get(n); if (!r) { r = { pub: 0, sub: 0, srv: 0, sys: 0, act: 0, params: 0 }; per.set(n, r); } return r; };
    for (const t of S.topics.values()) { for (const n of t.pubs) get(n).pub++; for (const n of t.subs) get(n).sub++; }
    for (const s of S.services.values()) if (s.node) { if (isSystemService(s.name)) get(s.node).sys++; else get(s.node).srv++; }
    for (const a of S.actions.values()) if (a.node) get(a.node).act++;
    for (const p of S.params.values()) if (p.node) get(p.node).params++;
    return (n) => per.get(n) || { pub: 0, sub: 0, srv: 0, sys: 0, act: 0, params: 0 };
  }

  // What a connection is: its declared nodes, else its implicit name and
  // what it registered under it (in this page's domain).
  function connWho(c, regs) {
    const flags = `${c.self ? ' <span class="chip self">this page</span>' : ''}${c.established === false ? ' <span class="pill warn" title="has not completed its opening yet">opening</span>' : ''}`;
    if (c.nodes.length) return `${c.nodes.slice(0, 3).map(nodeChip).join('')}${c.nodes.length > 3 ? `<span class="more">+${c.nodes.length - 3}</span>` : ''}${flags}`;
    const g = regs(c.client);
    const bits = [];
    if (g.pub) bits.push(`${g.pub} pub`);
    if (g.sub) bits.push(`${g.sub} sub`);
    if (g.srv + g.sys + g.act) bits.push(`${g.srv + g.sys + g.act} srv`);
    return `<span class="mono implicit" title="declared no node: known by its connection name">${esc(c.client)}</span>${flags}${bits.length ? ` <span class="muted">${bits.join(' · ')}</span>` : ''}`;
  }

  function renderConns() {
    const C = S.conns;
    if (!C) {
      $('conns-body').innerHTML = '<div class="empty">Reading /rosgate/connections…</div>';
      $('closed-body').innerHTML = '';
      return;
    }
    const elapsed = now() - C.at;
    const dom = (c) => (C.multiDomain ? `<td class="num">${esc(c.domain)}</td>` : '');
    const domTh = C.multiDomain ? '<th class="num">Domain</th>' : '';
    const rows = C.list.filter((c) => matches(c.client, c.peer, c.transport, ...c.nodes))
      .sort((a, b) => b.self - a.self || a.age_s - b.age_s);
    $('conns-count').textContent = C.list.length;
    const queued = C.list.reduce((a, c) => a + (Number(c.queued_bytes) || 0), 0);
    $('conns-aside').textContent = `${fmtBytes(queued)} queued now${C.multiDomain ? ' · all domains' : ''}${C.truncated ? ' · first 10 000 listed' : ''}`;
    if (!rows.length) {
      $('conns-body').innerHTML = '<div class="empty">No connection matches.</div>';
    } else {
      const regs = registrations();
      const html = [`<table class="tbl conns"><thead><tr><th>Node</th><th>Transport</th><th>Peer</th>${domTh}<th class="num">Age</th><th class="num">Queued</th><th class="num" title="topic messages queued to it, since it opened">Delivered</th><th class="num" title="topic messages dropped from its queue">Drops</th></tr></thead><tbody>`];
      for (const c of rows.slice(0, CFG.maxRows)) {
        const age = (Number(c.age_s) || 0) * 1000 + elapsed;
        const rate = c.rate ? `<div class="sub-rate">${fmtPerSec(c.rate)}</div>` : '';
        html.push(`<tr data-client="${esc(c.client)}" data-peer="${esc(c.peer)}" data-conn="${esc(c.id)}"${c.self ? ' class="self"' : ''}>
          <td>${connWho(c, regs)}</td><td>${transportPill(c.transport)}${c.role ? ` <span class="pill neutral" title="the role its token gives it">${esc(c.role)}</span>` : ''}</td><td class="mono">${esc(c.peer || '–')}</td>${dom(c)}
          <td class="num" title="since ${esc(new Date(stampMs(c.opened) - S.clockOffsetMs).toLocaleString())}">${fmtDur(age)}</td>
          <td class="num${c.queued_bytes ? '' : ' zero'}">${fmtBytes(c.queued_bytes)}</td>
          <td class="num${c.delivered ? '' : ' zero'}" data-delivered="${esc(c.delivered)}">${fmtNum(c.delivered)}${rate}</td>
          <td class="num${c.dropped ? ' bad-text' : ' zero'}">${fmtNum(c.dropped)}</td></tr>`);
      }
      html.push('</tbody></table>');
      if (rows.length > CFG.maxRows) html.push(`<div class="empty">${rows.length - CFG.maxRows} more: refine the filter.</div>`);
      $('conns-body').innerHTML = html.join('');
    }
    // Plain HTTP requests on the WebSocket port (this page's files,
    // /metrics scrapes) close as `http_served`: listed with "system" only.
    const http = C.closes.filter((c) => c.reason === 'http_served').length;
    const closes = C.closes.filter((c) => (S.showSystem || c.reason !== 'http_served') && matches(c.client, c.peer, c.reason));
    $('closed-count').textContent = closes.length || '';
    const hiddenNote = http && !S.showSystem ? `<div class="note">${plural(http, 'plain HTTP request')} (<code>http_served</code>) not shown: tick “system”.</div>` : '';
    if (!closes.length) {
      $('closed-body').innerHTML = `<div class="empty">${C.closes.length ? 'None to show.' : 'None since the gateway started.'}</div>${hiddenNote}`;
      return;
    }
    const t = serverNow();
    const html = [`<div class="scroll"><table class="tbl closed"><thead><tr><th>Closed</th><th>Node</th><th>Transport</th><th>Peer</th>${domTh}<th class="num">Lived</th><th class="num">Delivered</th><th class="num">Drops</th><th>Reason</th></tr></thead><tbody>`];
    for (const c of closes) {
      const at = stampMs(c.closed);
      html.push(`<tr data-closed="${esc(c.client)}" data-peer="${esc(c.peer)}">
        <td class="mono" title="${esc(new Date(at).toLocaleString())} · ${fmtDur(t - at)} ago">${esc(fmtClock(at))}</td>
        <td>${CONN_NODE.test(c.client) ? `<span class="mono implicit">${esc(c.client)}</span>` : nodeChip(c.client)}</td><td>${transportPill(c.transport)}</td>
        <td class="mono">${esc(c.peer || '–')}</td>${dom(c)}<td class="num">${fmtDur((Number(c.lived_s) || 0) * 1000)}</td>
        <td class="num${c.delivered ? '' : ' zero'}">${fmtNum(c.delivered)}</td><td class="num${c.dropped ? ' bad-text' : ' zero'}">${fmtNum(c.dropped)}</td><td>${reasonPill(c.reason, c.forced)}</td></tr>`);
    }
    html.push('</tbody></table></div>');
    $('closed-body').innerHTML = html.join('') + hiddenNote;
  }

  function renderLog() {
    const lines = S.rosout.filter((l) => l.level >= S.logLevel && matches(l.name, l.msg));
    if (!lines.length) {
      $('log-body').innerHTML = `<div class="empty">${S.rosout.length ? 'No line matches.' : 'Nothing logged since this page opened.'}</div>`;
      return;
    }
    $('log-body').innerHTML = lines.map((l) => {
      const lv = LEVELS[l.level] || String(l.level);
      return `<div class="line lv-${esc(lv)}"><span class="t">${esc(fmtClock(l.at))}</span><span class="lv">${esc(lv)}</span><span class="who">${esc(l.name)}</span><span class="msg">${esc(l.msg)}</span></div>`;
    }).join('');
  }

  function renderServices() {
    const services = [...S.services.values()].filter((s) => (S.showSystem || (!isSystemService(s.name) && !isHidden(s.name))) && matches(s.name, s.type, s.node))
      .sort((a, b) => a.name.localeCompare(b.name));
    const hiddenCount = [...S.services.keys()].filter(isSystemService).length;
    $('services-count').textContent = services.length;
    $('services-body').innerHTML = services.length
      ? `<table class="tbl"><thead><tr><th>Service</th><th>Provider</th></tr></thead><tbody>${services.slice(0, CFG.maxRows).map((s) =>
        `<tr><td><div class="name">${esc(s.name)}</div><div class="type">${esc(s.type || '—')}</div></td><td>${s.node ? nodeChip(s.node) : '<span class="muted">?</span>'}</td></tr>`).join('')}</tbody></table>`
      : `<div class="empty">No services${S.showSystem ? '' : ` (${hiddenCount} system services hidden: tick “system”)`}.</div>`;
    // The gateway's own actions (TF's /tf2_web_republisher) with the system ones.
    const actions = [...S.actions.values()].filter((a) => (S.showSystem || a.node !== '/rosgate') && matches(a.name, a.type, a.node)).sort((a, b) => a.name.localeCompare(b.name));
    $('actions-count').textContent = actions.length || '';
    $('actions-body').innerHTML = actions.length
      ? `<table class="tbl"><thead><tr><th>Action</th><th>Server</th></tr></thead><tbody>${actions.slice(0, CFG.maxRows).map((a) =>
        `<tr><td><div class="name">${esc(a.name)}</div><div class="type">${esc(a.type || '—')}</div></td><td>${a.node ? nodeChip(a.node) : '<span class="muted">?</span>'}</td></tr>`).join('')}</tbody></table>`
      : '<div class="empty">No actions.</div>';
  }

  function allNodes() {
    const set = new Set(S.declared);
    for (const t of S.topics.values()) { for (const n of t.pubs) set.add(n); for (const n of t.subs) set.add(n); }
    for (const s of S.services.values()) if (s.node) set.add(s.node);
    for (const a of S.actions.values()) if (a.node) set.add(a.node);
    return [...set];
  }

  function renderNodes() {
    const regs = registrations();
    const byNode = S.conns?.byNode || new Map();
    const nodes = allNodes().filter((n) => (S.showSystem || (n !== '/rosgate' && n !== S.self)) && matches(n, byNode.get(n)?.peer)).sort();
    $('nodes-count').textContent = nodes.length;
    if (!nodes.length) { $('nodes-body').innerHTML = '<div class="empty">No nodes.</div>'; return; }
    const html = ['<table class="tbl"><thead><tr><th>Node</th><th>Connection</th><th class="num">Pub</th><th class="num">Sub</th><th class="num">Srv</th><th class="num">Act</th><th class="num">Params</th></tr></thead><tbody>'];
    for (const n of nodes.slice(0, CFG.maxRows)) {
      const g = regs(n);
      const srv = g.srv + (S.showSystem ? g.sys : 0);
      const c = byNode.get(n);
      const conn = n === '/rosgate' ? '<span class="pill neutral">gateway</span>'
        : n === S.self ? '<span class="pill neutral">this page</span>'
          : c ? `<span class="nowrap"><span class="pill ${esc(c.transport)}">${esc(c.transport)}</span> <span class="mono muted">${esc(c.peer)}</span></span>`
            : '<span class="muted" title="held by the gateway, or not in the last connection list">–</span>';
      const z = (v) => `<td class="num${v ? '' : ' zero'}">${v}</td>`;
      html.push(`<tr data-node="${esc(n)}"><td class="mono">${esc(n)}${CONN_NODE.test(n) ? ' <span class="muted" title="a connection that declared no node">(connection)</span>' : ''}</td><td>${conn}</td>${z(g.pub)}${z(g.sub)}${z(srv)}${z(g.act)}${z(g.params)}</tr>`);
    }
    html.push('</tbody></table>');
    $('nodes-body').innerHTML = html.join('');
  }

  // The TF tree: each frame under its parent, depth-first, roots first.
  function renderTf() {
    const r = S.tf;
    const frames = Array.isArray(r?.frames) ? r.frames : [];
    $('tf').hidden = !frames.length;
    if (!frames.length) return;
    $('tf-count').textContent = frames.length;
    $('tf-aside').textContent = r.listening ? `${r.subscriptions} TF client${r.subscriptions === 1 ? '' : 's'}` : '/tf not read: no TF client';
    const kids = new Map();
    const isChild = new Set(frames.map((f) => f.child));
    for (const f of frames) {
      if (!kids.has(f.parent)) kids.set(f.parent, []);
      kids.get(f.parent).push(f);
    }
    const rows = [];
    const seen = new Set();
    const walk = (name, depth) => {
      if (seen.has(name) || depth > 64 || rows.length >= CFG.maxRows) return;
      seen.add(name);
      for (const f of (kids.get(name) || []).sort((a, b) => a.child.localeCompare(b.child))) {
        if (matches(f.child, f.parent)) {
          const how = f.static ? '<span class="pill neutral">static</span>' : esc(fmtHz(f.rate_hz));
          rows.push(`<tr><td class="mono" style="padding-left:${0.6 + depth * 1.1}em">${esc(f.child)}</td><td>${how}</td><td class="num">${fmtNum(f.received)}</td></tr>`);
        }
        walk(f.child, depth + 1);
      }
    };
    for (const root of [...kids.keys()].filter((p) => !isChild.has(p)).sort()) {
      if (matches(root)) rows.push(`<tr><td class="mono">${esc(root)}</td><td></td><td></td></tr>`);
      walk(root, 1);
    }
    $('tf-body').innerHTML = `<table class="tbl"><thead><tr><th>Frame</th><th>Rate</th><th class="num">Received</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
  }

  function renderGateways() {
    const f = S.fed;
    $('gateways').hidden = !f || !f.enabled;
    if (!f || !f.enabled) return;
    const others = f.gateways || [];
    $('gateways-count').textContent = others.length + 1;
    const graphOf = (id) => (f.graphs || []).find((g) => g.gateway === id) || { nodes: [], topics: [] };
    const html = ['<table class="tbl"><thead><tr><th>Gateway</th><th>Since</th><th class="num">Nodes</th><th class="num">Topics</th></tr></thead><tbody>'];
    html.push(`<tr data-gateway="${esc(f.gateway)}"><td class="mono" title="${esc(f.gateway)}">${esc(f.gateway.slice(0, 12))} <span class="pill neutral">this gateway</span></td><td>–</td><td class="num">–</td><td class="num">–</td></tr>`);
    for (const g of others) {
      const graph = graphOf(g.id);
      const nodes = graph.nodes || [];
      html.push(`<tr data-gateway="${esc(g.id)}" title="${esc(nodes.join('\n'))}"><td class="mono" title="${esc(g.id)}">${esc(g.id.slice(0, 12))}</td><td>${esc(fmtClock(g.since_ms))}</td><td class="num">${nodes.length}</td><td class="num">${(graph.topics || []).length}</td></tr>`);
    }
    html.push('</tbody></table>');
    $('gateways-body').innerHTML = html.join('');
  }

  function renderParams() {
    const params = [...S.params.values()].filter((p) => matches(p.key, p.value)).sort((a, b) => a.key.localeCompare(b.key));
    $('params-count').textContent = S.params.size || '';
    if (!params.length) {
      $('params-body').innerHTML = `<div class="empty">${S.params.size ? 'No parameter matches.' : 'No parameters.'}</div>`;
      return;
    }
    const t = Date.now();
    const html = ['<table class="tbl"><thead><tr><th>Node</th><th>Parameter</th><th>Type</th><th>Value</th></tr></thead><tbody>'];
    for (const p of params.slice(0, CFG.maxRows)) {
      const fresh = p.changedAt && t - p.changedAt < 4000 ? ' class="fresh"' : '';
      const v = p.value.length > 160 ? p.value.slice(0, 160) + '…' : p.value;
      html.push(`<tr${fresh}><td class="mono">${esc(p.node || '(global)')}</td><td class="mono">${esc(p.name)}</td><td><span class="pill neutral">${esc(p.type || '?')}</span></td><td class="mono val" title="${esc(p.value)}">${esc(v)}</td></tr>`);
    }
    html.push('</tbody></table>');
    if (S.paramsTruncated) html.push(`<div class="empty">${S.paramsTruncated} more parameters not read.</div>`);
    $('params-body').innerHTML = html.join('');
    if (params.some((p) => p.changedAt && t - p.changedAt < 4000)) setTimeout(() => scheduleRender('params'), 4000);
  }

  function renderHealth() {
    const st = S.stats;
    if (!st) { $('health-body').innerHTML = '<div class="empty">Waiting for /rosgate/stats…</div>'; return; }
    $('health-aside').textContent = `${S.startedAt ? `started ${new Date(S.startedAt).toLocaleString()} · ` : ''}refreshed every ${CFG.periodMs / 1000} s`;
    const closes = Object.entries(st.closes || {}).filter(([k, v]) => v && k !== 'http_served').sort((a, b) => b[1] - a[1]);
    const max = Math.max(1, ...closes.map(([, v]) => v));
    const errors = Object.entries(st.errors || {}).filter(([, v]) => v).sort((a, b) => b[1] - a[1]);
    const calls = [
      ['forwarded', st.calls_forwarded], ['answered', st.calls_answered], ['timed out', st.calls_timed_out, 'bad'],
      ['no provider', st.calls_failed_no_provider, 'warn'], ['provider gone', st.calls_failed_provider_gone, 'warn'],
    ];
    const html = ['<div class="health-grid">'];
    html.push(`<div><h4>Closes by reason <span class="muted">since start</span></h4>${closes.length ? `<ul class="bars">${closes.map(([k, v]) =>
      `<li class="${NORMAL_CLOSES.has(k) ? (k === 'peer_closed' ? 'ok' : 'neutral') : 'bad'}"><span class="k">${esc(k.replace(/_/g, ' '))}</span><span class="b"><i style="width:${((100 * v) / max).toFixed(1)}%"></i></span><span class="v">${fmtNum(v)}</span></li>`).join('')}</ul>` : '<div class="muted">none</div>'}</div>`);
    html.push(`<div><h4>Refused requests <span class="muted">${fmtNum(st.errors_total ?? 0)} in all</span></h4>${errors.length ? `<ul class="kv">${errors.map(([k, v]) =>
      `<li><span>${esc(k.replace(/_/g, ' '))}</span><b>${fmtNum(v)}</b></li>`).join('')}</ul>` : '<div class="muted">none</div>'}</div>`);
    html.push(`<div><h4>Service calls</h4><ul class="kv">${calls.map(([k, v, c]) => `<li><span>${k}</span><b class="${v && c ? c + '-text' : ''}">${fmtNum(v ?? 0)}</b></li>`).join('')}</ul></div>`);
    html.push(`<div><h4>Actions &amp; QoS</h4><ul class="kv">
      <li><span>goals sent</span><b>${fmtNum(st.goals_sent ?? 0)}</b></li><li><span>goals pending</span><b>${fmtNum(st.goals_pending ?? 0)}</b></li>
      <li><span>QoS incompatible</span><b class="${st.qos_incompatible ? 'warn-text' : ''}">${fmtNum(st.qos_incompatible ?? 0)}</b></li>
      <li><span>throttled away</span><b>${fmtNum(st.throttle_dropped ?? 0)}</b></li></ul></div>`);
    html.push('</div>');
    $('health-body').innerHTML = html.join('');
  }

  function describe(ev) {
    const N = (n) => `<b>${esc(n)}</b>`;
    const by = ev.client && ev.client !== ev.node ? ` <span class="muted">(${esc(ev.client)})</span>` : '';
    switch (ev.event) {
      case 'node_added': return ['add', `node ${N(ev.node)} declared${by}`];
      case 'node_removed': return ['del', `node ${N(ev.node)} gone${by}`];
      case 'publisher_added': return ['add', `${N(ev.node)} publishes ${N(ev.topic)}`];
      case 'publisher_removed': return ['del', `${N(ev.node)} stopped publishing ${N(ev.topic)}`];
      case 'subscriber_added': return ['add', `${N(ev.node)} subscribes to ${N(ev.topic)}`];
      case 'subscriber_removed': return ['del', `${N(ev.node)} unsubscribed from ${N(ev.topic)}`];
      case 'service_added': return ['add', `service ${N(ev.service)} by ${N(ev.node)}`];
      case 'service_removed': return ['del', `service ${N(ev.service)}`];
      case 'service_replaced': return ['mod', `service ${N(ev.service)} taken over by ${N(ev.node)} from ${N(ev.previous)}`];
      case 'action_added': return ['add', `action ${N(ev.action)} by ${N(ev.node)}`];
      case 'action_removed': return ['del', `action ${N(ev.action)}`];
      case 'action_replaced': return ['mod', `action ${N(ev.action)} taken over by ${N(ev.node)}`];
      case 'client_connected': return ['add', `client ${N(ev.client)} connected from ${esc(ev.address)} (${esc(ev.transport)})`];
      case 'client_disconnected': return [NORMAL_CLOSES.has(ev.reason) ? 'del' : 'bad', `client ${N(ev.client)} disconnected: ${esc(ev.reason)}`];
      default: return ['mod', ev.note ? esc(ev.note) : esc(JSON.stringify(ev))];
    }
  }

  function renderFeed() {
    // The page's own subscriptions, and anyone's to the gateway's own
    // topics, are not news (unless "system" is ticked).
    const items = S.feed.filter((f) => (S.showSystem || ((!S.self || (f.ev.node !== S.self && f.ev.client !== S.self)) && !GATEWAY_TOPICS.has(f.ev.topic))) &&
      matches(f.ev.node, f.ev.topic, f.ev.service, f.ev.action, f.ev.client, f.ev.address));
    $('feed-body').innerHTML = items.length ? items.slice(0, 60).map((f) => {
      const [cls, text] = describe(f.ev);
      return `<div class="ev ${cls}"><span class="t">${esc(fmtClock(f.at))}</span><span class="mark"></span><span>${text}</span></div>`;
    }).join('') : '<div class="empty">No change since this page opened.</div>';
  }

  // ------------------------------------------------------------ chrome

  function setStatus(state, text) {
    const el = $('status');
    el.dataset.state = state;
    $('status-text').textContent = text;
    // What is on screen is stale while the page is not connected.
    document.body.classList.toggle('stale', state === 'offline');
  }

  let toastTimer = null;
  function toast(text) {
    const el = $('toast');
    el.textContent = text;
    el.classList.add('show');
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => el.classList.remove('show'), 4000);
  }

  const THEMES = ['auto', 'light', 'dark'];
  function applyTheme(t) {
    if (t === 'auto') delete document.documentElement.dataset.theme; else document.documentElement.dataset.theme = t;
    const b = $('theme');
    b.title = `Theme: ${t}`;
    b.textContent = t === 'auto' ? '◐' : t === 'light' ? '☀' : '☾';
  }

  function wire() {
    let theme = 'auto';
    try { theme = localStorage.getItem('rosgate.theme') || 'auto'; } catch (e) { /* ignore */ }
    try { S.sort = ['name', 'hz', 'bps'].includes(localStorage.getItem('rosgate.sort')) ? localStorage.getItem('rosgate.sort') : 'name'; } catch (e) { /* ignore */ }
    applyTheme(theme);
    $('theme').addEventListener('click', () => {
      theme = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
      try { localStorage.setItem('rosgate.theme', theme); } catch (e) { /* ignore */ }
      applyTheme(theme);
    });
    $('filter').addEventListener('input', (e) => { S.filter = e.target.value.trim().toLowerCase(); scheduleRender('all'); });
    $('show-system').addEventListener('change', (e) => { S.showSystem = e.target.checked; scheduleRender('all'); });
    $('log-level').addEventListener('change', (e) => { S.logLevel = Number(e.target.value) || 0; scheduleRender('log'); });
    const toggle = (tr) => {
      const topic = tr?.dataset.topic;
      if (topic == null) return;
      if (S.open.has(topic)) closeTopic(topic); else openTopic(topic);
    };
    const sortBy = (th) => {
      S.sort = th.dataset.sort;
      try { localStorage.setItem('rosgate.sort', S.sort); } catch (e) { /* ignore */ }
      scheduleRender('topics');
    };
    $('topics-body').addEventListener('click', (e) => {
      const th = e.target.closest('th[data-sort]');
      if (th) { sortBy(th); return; }
      if (e.target.closest('.detail')) return;
      toggle(e.target.closest('tr.topic'));
    });
    $('topics-body').addEventListener('keydown', (e) => {
      if (e.key !== 'Enter' && e.key !== ' ') return;
      const th = e.target.closest('th[data-sort]');
      const tr = e.target.closest('tr.topic');
      if (!th && !tr) return;
      e.preventDefault();
      if (th) sortBy(th); else toggle(tr);
    });
    fetch('/version').then((r) => r.json()).then((v) => {
      $('version').textContent = `v${v.server?.version ?? '?'} · rosbridge v${v.protocol?.major ?? 2}${$('version').dataset.domain || ''}`;
    }).catch(() => {});
    const dom = new URLSearchParams(location.search).get('domain');
    if (dom) { $('version').dataset.domain = ` · domain ${dom}`; $('version').textContent += ` · domain ${dom}`; }
    setInterval(poll, CFG.periodMs);
    setInterval(tick, 1000);
    scheduleRender('all');
    bridge.connect();
  }

  // Exposed for tests and for the curious (read-only use).
  window.rosgateDashboard = { state: S, config: CFG };
  wire();
})();
