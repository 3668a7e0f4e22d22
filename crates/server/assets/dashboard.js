// rosgate dashboard: plain JavaScript, no dependencies, served by the
// gateway itself. It speaks rosbridge v2 JSON over the WebSocket of the
// port it was loaded from (ws://<same host>/) and builds its picture of the
// graph the way a careful client should:
//
// - once, at (re)connection: rosapi (topics, nodes, node_details,
//   services, action_servers, get_param_names, ...) gives a snapshot;
// - then it follows the graph's change events on /rosgate/graph
//   (node/publisher/subscriber/service/action/client added and removed),
//   /parameter_events, /connected_clients, /client_count and /rosout. There
//   is no polling of the graph; a `"resync": true` graph message (more
//   than 1000 changes in one turn) triggers a fresh snapshot;
// - /rosgate/stats is read every 2 s (while the tab is visible) for the
//   gateway-wide counters; rates there are deltas between two reads.
//
// Per-topic message rate and bandwidth: the gateway keeps no per-topic
// counters, so the only sound way to know a topic's rate is to receive it.
// The page therefore measures only the topics the user opens (a click on
// the row), like `ros2 topic hz` / `ros2 topic bw` would, and never the
// whole graph behind the user's back:
//
// - a plain subscription (no QoS, no throttle_rate, no queue_length: any of
//   those would move the topic off the gateway's fast path for everyone);
// - messages are counted on arrival without being parsed (the topic name
//   is read from the frame's fixed prefix), in 100 ms buckets over a 5 s
//   sliding window; bandwidth is the size of the message's JSON text;
//   what arrives in the first 150 ms after subscribing is not counted (a
//   latched publisher's cache is replayed at once and is not the rate);
// - at most 8 topics are measured at once (opening a 9th stops the oldest);
// - a topic measured above 2 MiB/s or 2000 msg/s is switched to duty-cycled
//   sampling: subscribed 1 s out of every 10 s, so a camera stream costs the
//   gateway and the browser a tenth of its bandwidth; the figure is then
//   marked "sampled";
// - while the tab is hidden, measurements and the stats refresh pause and
//   the topic subscriptions are withdrawn;
// - if the browser falls behind anyway, the gateway's own per-connection
//   limit (--max-queue-bytes, oldest first) protects it.
//
// Gateway-wide throughput (messages published/delivered per second, bytes
// in/out per second, drops) comes from the /rosgate/stats deltas.
(() => {
  'use strict';

  const CFG = {
    statsPeriodMs: 2000,
    rateWindowMs: 5000,
    bucketMs: 100,
    settleMs: 150,
    maxWatched: 8,
    heavyBytesPerSec: 2 * 1024 * 1024,
    heavyMsgsPerSec: 2000,
    sampleOnMs: 1000,
    samplePeriodMs: 10000,
    callTimeoutMs: 10000,
    concurrency: 8,
    rosoutKept: 300,
    closedKept: 50,
    feedKept: 120,
    historyPoints: 90,
    maxRows: 300,
    maxParamValues: 500,
    previewChars: 2000,
  };

  const GATEWAY_TOPICS = new Set(['/client_count', '/connected_clients', '/parameter_events', '/rosout', '/rosgate/graph']);
  const PARAM_SERVICE_SUFFIXES = ['/describe_parameters', '/get_parameter_types', '/get_parameters',
    '/list_parameters', '/set_parameters', '/set_parameters_atomically'];
  const NORMAL_CLOSES = new Set(['peer_closed', 'http_served', 'shutdown']);
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
  const isHidden = (name) => String(name).split('/').some((t) => t.startsWith('_'));
  const isSystemService = (s) => s.startsWith('/rosapi/') || s.startsWith('/rosgate/') ||
    PARAM_SERVICE_SUFFIXES.some((x) => s.endsWith(x));
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
    domain: null,
    resyncing: false,
    buffered: [],             // graph events that arrived during a snapshot
    topics: new Map(),        // name -> {name, type, pubs:Set, subs:Set}
    services: new Map(),      // name -> {name, type, node}
    actions: new Map(),       // name -> {name, type, node}
    declared: new Set(),      // declared nodes (+ /rosgate)
    params: new Map(),        // "node:name" -> {key, node, name, type, value, changedAt}
    paramsTruncated: 0,
    conns: new Map(),         // client name -> {name, transport, address, since, pre, key}
    pendingJoins: [],         // client names seen connecting, not yet matched to a /connected_clients entry
    entries: [],              // /connected_clients entries, oldest first
    entriesSeen: false,
    clientCount: null,
    closed: [],
    rosout: [],
    feed: [],
    stats: null,
    statsAt: 0,
    rates: null,              // per-second deltas of the last two stats reads
    history: { published: [], delivered: [], bytesIn: [], bytesOut: [] },
    meters: new Map(),        // topic -> Meter
    expanded: new Set(),
    topicInfo: new Map(),
    preview: new Map(),
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
      // Fast path: a message of a measured topic is counted, not parsed.
      if (typeof data === 'string' && data.startsWith(PUBLISH_PREFIX)) {
        const end = data.indexOf('"', PUBLISH_PREFIX.length);
        if (end > 0) {
          const topic = data.slice(PUBLISH_PREFIX.length, end);
          const m = S.meters.get(topic);
          if (m && !topic.includes('\\')) {
            const at = data.indexOf('"msg":', end);
            m.record(at > 0 ? data.length - (at + 6) - 1 : data.length, data);
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

  // ------------------------------------------------------------ topic meters

  // One measured topic: counts and bytes in 100 ms buckets over the last
  // rateWindowMs, either continuously ("live") or during 1 s windows every
  // 10 s ("sampled", for heavy topics).
  class Meter {
    constructor(topic) {
      this.topic = topic;
      this.mode = 'live';
      this.buckets = [];          // [bucketIndex, count, bytes]
      this.activeSince = null;    // when counting (re)started
      this.subscribed = false;
      this.lastAt = null;         // last message (performance.now)
      this.lastRaw = null;
      this.total = 0;
      this.sample = null;         // last sampled-window result {hz, bps, at}
      this.timer = null;
    }
    start() {
      if (this.subscribed) return;
      // The gateway's own topics are subscribed to anyway.
      if (!GATEWAY_TOPICS.has(this.topic)) bridge.subscribe(this.topic);
      this.subscribed = true;
      this.activeSince = now() + CFG.settleMs;
      this.buckets = [];
    }
    stop() {
      if (!this.subscribed) return;
      if (!GATEWAY_TOPICS.has(this.topic)) bridge.unsubscribe(this.topic);
      this.subscribed = false;
    }
    dispose() {
      clearTimeout(this.timer);
      this.stop();
    }
    record(bytes, raw) {
      const t = now();
      this.lastAt = t;
      this.lastRaw = raw;
      if (!this.subscribed || this.activeSince == null || t < this.activeSince) return;
      this.total++;
      const idx = Math.floor(t / CFG.bucketMs);
      const last = this.buckets[this.buckets.length - 1];
      if (last && last[0] === idx) { last[1]++; last[2] += bytes; } else this.buckets.push([idx, 1, bytes]);
      if (this.buckets.length > 2 * CFG.rateWindowMs / CFG.bucketMs) this.prune(t);
    }
    prune(t) {
      const oldest = Math.floor((t - CFG.rateWindowMs) / CFG.bucketMs);
      let i = 0;
      while (i < this.buckets.length && this.buckets[i][0] < oldest) i++;
      if (i) this.buckets.splice(0, i);
    }
    // {hz, bps, warming} over the live window.
    measure() {
      const t = now();
      if (!this.subscribed || this.activeSince == null) return null;
      this.prune(t);
      const span = Math.min(CFG.rateWindowMs, t - this.activeSince);
      if (span < 400) return { warming: true };
      let n = 0, b = 0;
      for (const [, c, by] of this.buckets) { n += c; b += by; }
      return { hz: (n * 1000) / span, bps: (b * 1000) / span, warming: span < CFG.rateWindowMs && n === 0 };
    }
    // Called every second by the ticker.
    tick() {
      if (this.mode !== 'live' || !this.subscribed) return;
      const m = this.measure();
      if (m && !m.warming && (m.bps > CFG.heavyBytesPerSec || m.hz > CFG.heavyMsgsPerSec)) {
        this.sample = { hz: m.hz, bps: m.bps, at: Date.now() };
        this.mode = 'sampled';
        this.stop();
        this.schedule();
      }
    }
    schedule() {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => {
        if (document.hidden || !S.live) { this.schedule(); return; }
        this.start();
        const began = this.activeSince;
        this.timer = setTimeout(() => {
          const span = now() - began;
          let n = 0, b = 0;
          for (const [, c, by] of this.buckets) { n += c; b += by; }
          if (span > 0) this.sample = { hz: (n * 1000) / span, bps: (b * 1000) / span, at: Date.now() };
          if (this.sample && this.sample.bps < CFG.heavyBytesPerSec / 2 && this.sample.hz < CFG.heavyMsgsPerSec / 2) {
            // Calm again: back to continuous measurement.
            this.mode = 'live';
            this.activeSince = began;
            scheduleRender('topics');
            return;
          }
          this.stop();
          this.schedule();
          scheduleRender('topics');
        }, CFG.sampleOnMs + CFG.settleMs);
      }, CFG.samplePeriodMs - CFG.sampleOnMs);
    }
    // What the table shows.
    view() {
      if (this.mode === 'sampled') {
        return this.sample ? { hz: this.sample.hz, bps: this.sample.bps, note: 'sampled 1 s every 10 s (heavy topic)' } : { warming: true };
      }
      const m = this.measure();
      if (!m) return { paused: true };
      return m;
    }
  }

  function loadWatched() {
    try { return JSON.parse(localStorage.getItem('rosgate.watch') || '[]').filter((x) => typeof x === 'string'); } catch (e) { return []; }
  }
  function saveWatched() {
    try { localStorage.setItem('rosgate.watch', JSON.stringify([...S.expanded])); } catch (e) { /* private mode */ }
  }

  function watch(topic) {
    if (S.expanded.has(topic)) return;
    S.expanded.add(topic);
    if (S.expanded.size > CFG.maxWatched) {
      const oldest = S.expanded.values().next().value;
      unwatch(oldest);
      toast(`At most ${CFG.maxWatched} topics are measured at once: stopped ${oldest}`);
    }
    let m = S.meters.get(topic);
    if (!m) { m = new Meter(topic); S.meters.set(topic, m); }
    if (!document.hidden && S.live) m.start();
    refreshTopicInfo(topic);
    saveWatched();
    scheduleRender('topics');
  }
  function unwatch(topic) {
    S.expanded.delete(topic);
    const m = S.meters.get(topic);
    if (m) { m.dispose(); S.meters.delete(topic); }
    S.topicInfo.delete(topic);
    saveWatched();
    scheduleRender('topics');
  }

  // /rosgate/topic_info for an open topic, at most one call in flight each
  // and re-read only when the graph says its endpoints changed.
  const infoDue = new Map();
  function refreshTopicInfo(topic) {
    if (!S.expanded.has(topic) || infoDue.has(topic)) return;
    infoDue.set(topic, setTimeout(async () => {
      try {
        const info = await bridge.call('/rosgate/topic_info', { topic });
        if (S.expanded.has(topic)) { S.topicInfo.set(topic, info); scheduleRender('topics'); }
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

  function transportOf(name) { const m = CONN_NODE.exec(name); return m ? m[1] : ''; }
  function connNumber(name) { const m = CONN_NODE.exec(name); return m ? Number(m[2]) : Infinity; }

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
      case 'client_connected':
        S.conns.set(ev.client, { name: ev.client, transport: ev.transport || transportOf(ev.client), address: ev.address || '', since: Date.now(), sinceApprox: true, pre: false, key: null });
        S.pendingJoins.push(ev.client);
        break;
      case 'client_disconnected': {
        const c = S.conns.get(ev.client) || { name: ev.client, transport: transportOf(ev.client), address: '' };
        S.conns.delete(ev.client);
        S.pendingJoins = S.pendingJoins.filter((n) => n !== ev.client);
        for (const e of S.entries) if (e.name === ev.client) e.name = null;
        S.closed.unshift({ name: ev.client, transport: c.transport, address: c.address, since: c.since, at: Date.now(), reason: ev.reason || '?' });
        S.closed.length = Math.min(S.closed.length, CFG.closedKept);
        scheduleRender('conns');
        break;
      }
      default: break;
    }
    if (ev.topic && S.expanded.has(ev.topic)) refreshTopicInfo(ev.topic);
    return true;
  }

  function onGraph(msg) {
    const events = Array.isArray(msg?.events) ? msg.events : [];
    if (S.resyncing) { S.buffered.push(...events); if (msg.resync) S.resyncAgain = true; return; }
    for (const ev of events) {
      if (applyEvent(ev) !== false) addFeed(ev);
    }
    if (msg.resync) { addFeed({ event: 'resync', note: 'more than 1000 changes in one turn: re-reading the graph' }); resync(); }
    reconcileClients();
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
    const c = S.conns.get(node) || { name: node, transport: transportOf(node), address: '', since: null, pre: true, key: null };
    c.self = true;
    S.conns.set(node, c);
    reconcileClients();
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
      const actionNames = ac.action_servers || [];
      await pool(actionNames, CFG.concurrency, async (a) => {
        const ty = (await call('/rosapi/action_type', { action: a })).type || '';
        // rosapi names no action server's node: keep what events told us.
        actions.set(a, { name: a, type: ty, node: S.actions.get(a)?.node || '' });
      });
      const names = pn.names || [];
      const params = new Map();
      S.paramsTruncated = Math.max(0, names.length - CFG.maxParamValues);
      await pool(names.slice(0, CFG.maxParamValues), CFG.concurrency, async (full) => {
        const r = await call('/rosapi/get_param', { name: full });
        const { node, name } = splitParam(full);
        let value = r.value;
        let type = '';
        try { const v = JSON.parse(r.value); type = jsonType(v); value = JSON.stringify(v); } catch (e) { /* keep text */ }
        params.set(full, { key: full, node, name, type, value, changedAt: 0 });
      });
      if (epoch !== S.epoch) return;
      S.topics = topics;
      S.services = services;
      S.actions = actions;
      S.declared = new Set(nodes.filter((n) => !CONN_NODE.test(n)));
      S.params = params;
      // Connections known by their node names (those holding a registration).
      for (const n of nodes) {
        const m = CONN_NODE.exec(n);
        if (m && !S.conns.has(n)) S.conns.set(n, { name: n, transport: m[1], address: '', since: null, pre: true, key: null });
      }
    } catch (e) {
      if (epoch === S.epoch && S.live) toast(`Could not read the graph: ${e.message}`);
    } finally {
      S.resyncing = false;
      const buffered = S.buffered;
      S.buffered = [];
      for (const ev of buffered) if (applyEvent(ev) !== false) addFeed(ev);
      for (const t of S.expanded) refreshTopicInfo(t);
      reconcileClients();
      scheduleRender('all');
      if (S.resyncAgain) { S.resyncAgain = false; if (epoch === S.epoch) resync(); }
    }
  }

  // ------------------------------------------------------------ connections

  // /connected_clients lists every open connection of the domain with its
  // address and connection time, but not its name or transport; graph
  // events name connections (with address and transport) as they arrive.
  // Entries are matched to names: a new entry belongs to the client that
  // was just seen connecting (both in gateway order); the entries that were
  // there before the page are matched to the connection names rosapi lists
  // only when the two sets have the same size (all of them hold a
  // registration), since connection numbers and connection times follow the
  // same order. Otherwise those rows stay unnamed rather than guessed.
  function onConnectedClients(msg) {
    const list = (msg?.clients || []).map((c) => {
      const t = c.connection_time || {};
      const key = `${c.ip_address}|${t.sec}|${t.nanosec}`;
      return { key, ip: c.ip_address || '', at: (t.sec || 0) * 1000 + (t.nanosec || 0) / 1e6, raw: c };
    }).sort((a, b) => a.at - b.at);
    const prev = new Map(S.entries.map((e) => [e.key, e]));
    const first = !S.entriesSeen;
    S.entriesSeen = true;
    for (const e of list) {
      const old = prev.get(e.key);
      if (old) { e.name = old.name; e.pre = old.pre; } else { e.name = null; e.pre = first; }
      // A gateway that names its clients in this message makes guessing moot.
      if (e.raw.client) e.name = e.raw.client;
    }
    S.entries = list;
    reconcileClients();
    scheduleRender('conns');
  }

  function reconcileClients() {
    const taken = new Set(S.entries.map((e) => e.name).filter(Boolean));
    const byNumber = (a, b) => connNumber(a) - connNumber(b);
    // Entries that appeared while the page watched <-> clients seen
    // connecting meanwhile. Both lists follow the gateway's order; they are
    // matched when they agree in size (the list lags the events by at most
    // 100 ms), never guessed.
    const joins = S.pendingJoins.filter((n) => S.conns.has(n) && !taken.has(n)).sort(byNumber);
    const fresh = S.entries.filter((e) => !e.name && !e.pre);
    if (fresh.length && fresh.length === joins.length) fresh.forEach((e, i) => { e.name = joins[i]; taken.add(joins[i]); });
    S.pendingJoins = joins.filter((n) => !taken.has(n));
    // Entries that were there before the page <-> connection names rosapi listed.
    const zip = () => {
      const unnamed = S.entries.filter((e) => !e.name && e.pre);
      const pre = [...S.conns.values()].filter((c) => c.pre && !taken.has(c.name) && CONN_NODE.test(c.name))
        .sort((a, b) => byNumber(a.name, b.name));
      if (unnamed.length && unnamed.length === pre.length) unnamed.forEach((e, i) => { e.name = pre[i].name; taken.add(e.name); });
      return unnamed.length === pre.length;
    };
    if (!zip() && S.self && !taken.has(S.self)) {
      // The page's own row, at least: the newest entry that was there when
      // the page connected, if it is as old as this WebSocket (the entry
      // list comes right after the page's subscription, so nothing else is
      // likely to be newer). The rest is then matched as above if it can be.
      const pre = S.entries.filter((e) => e.pre);
      const newest = pre[pre.length - 1];
      if (newest && !newest.name && Math.abs(newest.at - S.openedAt) < 10000) {
        newest.name = S.self;
        taken.add(S.self);
        zip();
      }
    }
    for (const e of S.entries) {
      if (!e.name) continue;
      const c = S.conns.get(e.name) || { name: e.name, transport: e.raw.transport || transportOf(e.name), pre: e.pre };
      c.address = c.address || e.ip;
      c.since = e.at;
      c.sinceApprox = false;
      c.key = e.key;
      S.conns.set(e.name, c);
    }
  }

  // ------------------------------------------------------------ parameters

  function splitParam(full) {
    const i = full.indexOf(':');
    return i < 0 ? { node: '', name: full } : { node: full.slice(0, i), name: full.slice(i + 1) };
  }
  function jsonType(v) {
    if (typeof v === 'boolean') return 'bool';
    if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'double';
    if (typeof v === 'string') return 'string';
    if (Array.isArray(v)) return v.length ? jsonType(v[0]) + '[]' : '[]';
    return v === null ? 'unset' : 'object';
  }
  function paramValue(pv) {
    const type = Number(pv?.type) || 0;
    const f = PARAM_FIELDS[type];
    return { type: PARAM_TYPES[type] || String(type), value: f ? JSON.stringify(pv[f]) : '' };
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
    const st = m?.stamp || {};
    S.rosout.unshift({ at: (st.sec || 0) * 1000 + (st.nanosec || 0) / 1e6, level: Number(m?.level) || 0, name: m?.name || '', msg: m?.msg ?? '' });
    S.rosout.length = Math.min(S.rosout.length, CFG.rosoutKept);
    scheduleRender('log');
  }

  // ------------------------------------------------------------ stats

  let statsBusy = false;
  async function readStats() {
    if (statsBusy || !S.live || document.hidden) return;
    statsBusy = true;
    try {
      const st = await bridge.call('/rosgate/stats');
      const t = now();
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
      scheduleRender('kpis');
      scheduleRender('health');
      scheduleRender('conns');
    } catch (e) { /* next tick */ }
    statsBusy = false;
  }

  // ------------------------------------------------------------ connection lifecycle

  let restored = false;
  bridge.handlers.open = () => {
    S.epoch++;
    S.live = true;
    S.openedAt = Date.now();
    setStatus('live', 'live');
    S.self = null;
    S.conns = new Map();
    S.pendingJoins = [];
    S.entries = [];
    S.entriesSeen = false;
    S.stats = null;
    S.rates = null;
    S.marker = `/_rosgate_dashboard/probe_${randomToken()}`;
    // The graph first: from now on no change is missed; the snapshot
    // comes after, and the marker's own event names this connection.
    bridge.subscribe('/rosgate/graph');
    bridge.subscribe(S.marker);
    for (const t of ['/connected_clients', '/client_count', '/rosout', '/parameter_events']) bridge.subscribe(t);
    for (const m of S.meters.values()) { m.subscribed = false; if (m.mode === 'live' && !document.hidden) m.start(); else if (m.mode === 'sampled') m.schedule(); }
    resync().then(() => {
      // Topics measured before a reload, if they still exist (subscribing
      // to a vanished one would bring it back as an empty topic).
      if (restored) return;
      restored = true;
      for (const t of loadWatched()) if (S.topics.has(t) && !S.expanded.has(t) && S.expanded.size < CFG.maxWatched) watch(t);
    });
    readStats();
  };
  bridge.handlers.close = () => {
    S.live = false;
    S.resyncing = false;
    for (const m of S.meters.values()) m.subscribed = false;
    scheduleRender('all');
  };
  bridge.handlers.publish = (topic, msg) => {
    switch (topic) {
      case '/rosgate/graph': onGraph(msg); break;
      case '/connected_clients': onConnectedClients(msg); break;
      case '/client_count': S.clientCount = msg?.data ?? null; scheduleRender('kpis'); break;
      case '/rosout': onRosout(msg); break;
      case '/parameter_events': onParameterEvent(msg); break;
      default: {
        // A measured topic whose name needed JSON escapes (the fast path
        // reads names verbatim).
        const m = S.meters.get(topic);
        if (m && !GATEWAY_TOPICS.has(topic)) m.record(JSON.stringify(msg ?? null).length, JSON.stringify({ op: 'publish', topic, msg }));
      }
    }
  };
  bridge.handlers.status = (m) => {
    if (m.level === 'error' || m.level === 'warning') addFeed({ event: 'status', note: `${m.level}: ${m.msg}` });
  };

  document.addEventListener('visibilitychange', () => {
    for (const m of S.meters.values()) {
      if (document.hidden) { if (m.mode === 'live') m.stop(); } else if (m.mode === 'live' && S.live) m.start();
    }
    if (!document.hidden) readStats();
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
    if (all) { renderServices(); renderNodes(); renderFeed(); }
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

  function sparkline(values, cls) {
    const w = 200, h = 32;
    if (!values || values.length < 2) return '';
    const max = Math.max(...values, 1e-9);
    const step = w / (values.length - 1);
    const off = 0;
    const pts = values.map((v, i) => [off + i * step, h - 2 - (v / max) * (h - 4)]);
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
    const userTopics = [...S.topics.values()].filter((t) => !GATEWAY_TOPICS.has(t.name) && !isHidden(t.name)).length;
    const userServices = [...S.services.keys()].filter((s) => !isSystemService(s)).length;
    // This domain's open connections, as /connected_clients lists them now.
    const open = S.entriesSeen ? S.entries.length : (S.clientCount ?? st.connections_open);
    const tcp = S.entries.filter((e) => e.name && transportOf(e.name) === 'tcp').length;
    const ws = S.entries.filter((e) => e.name && transportOf(e.name) === 'ws').length;
    const named = tcp + ws;
    const mem = st.memory_bytes, budget = st.memory_budget_bytes;
    const memPct = budget ? Math.min(100, (100 * mem) / budget) : 0;
    const memCls = memPct > 85 ? 'bad' : memPct > 60 ? 'warn' : 'ok';
    const drops = r?.dropped || 0;
    const forced = Object.entries(st.closes || {}).filter(([k, v]) => v && !NORMAL_CLOSES.has(k)).reduce((a, [, v]) => a + v, 0);
    const nodes = allNodes().filter((n) => n !== '/rosgate' && n !== S.self).length;
    $('kpis').innerHTML = [
      kpi('Connections', fmtNum(open ?? 0), named ? `${tcp} tcp · ${ws} ws${named < (open ?? 0) ? ` · ${(open ?? 0) - named} unnamed` : ''}` : `${fmtNum(st.connections_accepted ?? 0)} accepted in all`),
      kpi('Topics', fmtNum(userTopics), `${plural(st.publishers ?? 0, 'advert')} · ${plural(st.subscriptions ?? 0, 'sub')}`),
      kpi('Nodes', fmtNum(nodes), `${plural(S.params.size, 'parameter')}`),
      kpi('Services', fmtNum(userServices), `${plural(S.actions.size, 'action')} · ${fmtNum(st.calls_pending ?? 0)} in flight`),
      kpi('Messages', r ? fmtPerSec(r.published) : '–', r ? `published · ${fmtPerSec(r.delivered)} out` : 'measuring…', sparkline(S.history.published, 'c1'), 'graph'),
      kpi('Bandwidth', r ? `${fmtBytes(r.bytesIn + r.bytesOut)}/s` : '–', r ? `${fmtBytes(r.bytesIn)} in · ${fmtBytes(r.bytesOut)} out` : 'measuring…', sparkline(S.history.bytesOut.map((v, i) => v + (S.history.bytesIn[i] || 0)), 'c2'), 'graph'),
      kpi('Memory', mem != null ? fmtBytes(mem) : '–', budget ? `${memPct < 0.1 && mem ? '<0.1' : memPct.toFixed(1)}% of ${fmtBytes(budget)}` : '&nbsp;',
        `<div class="bar ${memCls}"><span style="width:${Math.max(memPct, mem ? 1 : 0).toFixed(1)}%"></span></div>`),
      kpi('Drops', fmtNum(st.dropped ?? 0), drops ? `<b class="bad-text">${fmtPerSec(drops)} now</b>` : `${plural(forced, 'forced close')}`, '', drops ? 'alarm' : ''),
    ].join('');
  }

  function rateCells(topic) {
    const t = S.topics.get(topic);
    const m = S.meters.get(topic);
    if (!m) {
      const idle = t && !t.pubs.size;
      return [`<span class="muted">${idle ? 'no publisher' : 'open to measure'}</span>`, ''];
    }
    const v = m.view();
    if (v.paused) return ['<span class="muted">paused</span>', ''];
    if (v.warming) return ['<span class="muted">measuring…</span>', ''];
    const note = v.note ? ` <span class="badge warn" title="${esc(v.note)}">sampled</span>` : '';
    const cls = v.hz > 0 ? 'rate' : 'rate zero';
    return [`<span class="${cls}" data-hz="${v.hz.toFixed(3)}">${fmtHz(v.hz)}</span>${note}`, `<span class="bw">${fmtBytes(v.bps)}/s</span>`];
  }

  function renderTopics() {
    const rows = [...S.topics.values()].filter((t) => userTopic(t) && matches(t.name, t.type)).sort((a, b) => a.name.localeCompare(b.name));
    $('topics-count').textContent = rows.length;
    if (!rows.length) {
      $('topics-body').innerHTML = `<div class="empty">${S.topics.size ? 'No topic matches.' : 'No topics yet.'}</div>`;
      return;
    }
    const shown = rows.slice(0, CFG.maxRows);
    const html = [`<table class="tbl topics"><thead><tr><th class="caret"></th><th>Topic</th><th>Publishers</th><th>Subscribers</th><th class="num">Rate</th><th class="num">Bandwidth</th></tr></thead><tbody>`];
    for (const t of shown) {
      const open = S.expanded.has(t.name);
      const subs = new Set([...t.subs].filter((n) => n !== S.self));
      const [rate, bw] = rateCells(t.name);
      const warn = S.topicInfo.get(t.name)?.incompatible?.length ? ' <span class="badge bad" title="incompatible QoS pairs">QoS</span>' : '';
      html.push(`<tr class="topic${open ? ' open' : ''}" data-topic="${esc(t.name)}" tabindex="0" aria-expanded="${open}">
        <td class="caret">${open ? '▾' : '▸'}</td>
        <td><div class="name">${esc(t.name)}${warn}</div><div class="type">${esc(t.type || '—')}</div></td>
        <td><span class="n ${t.pubs.size ? '' : 'zero'}">${t.pubs.size}</span>${chips(t.pubs)}</td>
        <td><span class="n ${subs.size ? '' : 'zero'}">${subs.size}</span>${chips(subs)}${t.subs.has(S.self) && !GATEWAY_TOPICS.has(t.name) ? '<span class="chip self" title="this page subscribes to measure it">+ this page</span>' : ''}</td>
        <td class="num" data-rate="${esc(t.name)}">${rate}</td><td class="num" data-bw="${esc(t.name)}">${bw}</td></tr>`);
      if (open) html.push(`<tr class="detail"><td></td><td colspan="5">${topicDetail(t)}</td></tr>`);
    }
    html.push('</tbody></table>');
    if (rows.length > shown.length) html.push(`<div class="empty">${rows.length - shown.length} more: refine the filter.</div>`);
    $('topics-body').innerHTML = html.join('');
  }

  function qosText(q) {
    if (!q) return '';
    const parts = [];
    if (q.reliability && q.reliability !== 'any') parts.push(q.reliability.replace('_', ' '));
    if (q.durability && q.durability !== 'any') parts.push(q.durability.replace('_', ' '));
    if (q.depth != null) parts.push(`depth ${q.depth}`);
    return parts.length ? parts.join(' · ') : 'default QoS';
  }

  function topicDetail(t) {
    const info = S.topicInfo.get(t.name);
    const m = S.meters.get(t.name);
    const parts = ['<div class="detail-grid">'];
    const endpoint = (e, kind) => {
      const extra = [];
      if (kind === 'pub' && e.latched_messages) extra.push(`${e.latched_messages} latched`);
      if (kind === 'pub' && e.peers) extra.push('wants peer counts');
      if (kind === 'sub' && e.throttle_ms) extra.push(`throttle ${e.throttle_ms} ms`);
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
    parts.push(`<div class="span2" data-preview="${esc(t.name)}">${previewHtml(t.name)}</div>`);
    parts.push('</div>');
    return parts.join('');
  }

  // Indented JSON, with arrays of numbers, strings and booleans kept on one line.
  function prettyJson(v) {
    return JSON.stringify(v, null, 2).replace(/\[\n\s*((?:[^\[\]{}\n]+,\n\s*)*[^\[\]{}\n]+)\n\s*\]/g,
      (all, inner) => `[${inner.split(/,\n\s*/).join(', ')}]`);
  }

  // The last message of a measured topic, parsed only here (at most every
  // 2 s), never on arrival.
  function previewHtml(topic) {
    const m = S.meters.get(topic);
    let preview = '<span class="muted">no message received yet</span>';
    if (m?.lastRaw) {
      let text = '';
      // A big message is shown as its first characters, not parsed.
      if (m.lastRaw.length > 256 * 1024) text = m.lastRaw.slice(0, CFG.previewChars);
      else try { text = prettyJson(JSON.parse(m.lastRaw).msg); } catch (e) { text = m.lastRaw; }
      if (text.length > CFG.previewChars) text = text.slice(0, CFG.previewChars) + `\n… (${fmtBytes(m.lastRaw.length)} in all)`;
      preview = `<pre>${esc(text)}</pre>`;
    }
    const age = m?.lastAt ? `${fmtDur(now() - m.lastAt)} ago` : '';
    return `<h4>Last message <span class="muted">${age}</span></h4>${preview}`;
  }

  // Every second: refresh the measured figures in place (no table rebuild).
  function tickRates() {
    for (const m of S.meters.values()) m.tick();
    const body = $('topics-body');
    for (const [topic] of S.meters) {
      const sel = CSS.escape(topic);
      const rc = body.querySelector(`[data-rate="${sel}"]`);
      if (!rc) continue;
      const [rate, bw] = rateCells(topic);
      rc.innerHTML = rate;
      const bc = body.querySelector(`[data-bw="${sel}"]`);
      if (bc) bc.innerHTML = bw;
    }
    // Message previews follow at a slower pace, in place.
    if (++tickCount % 2 === 0) {
      for (const topic of S.expanded) {
        const el = body.querySelector(`[data-preview="${CSS.escape(topic)}"]`);
        if (el && !el.contains(document.getSelection()?.anchorNode)) el.innerHTML = previewHtml(topic);
      }
    }
    // Relative times in the connections table.
    if (tickCount % 5 === 0) scheduleRender('conns');
  }
  let tickCount = 0;

  function transportPill(tr) {
    return tr ? `<span class="pill ${esc(tr)}">${esc(tr === 'ws' ? 'WebSocket' : tr.toUpperCase())}</span>` : '<span class="muted" title="not known for this connection">–</span>';
  }
  function reasonPill(reason) {
    const cls = reason === 'peer_closed' ? 'ok' : NORMAL_CLOSES.has(reason) ? 'neutral' : 'bad';
    return `<span class="pill ${cls}">${esc(reason.replace(/_/g, ' '))}</span>`;
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

  function renderConns() {
    const st = S.stats || {};
    const rows = S.entries.map((e) => {
      const c = e.name ? S.conns.get(e.name) : null;
      return { e, c, name: e.name, transport: e.raw.transport || c?.transport || (e.name ? transportOf(e.name) : ''), address: e.ip, since: e.at };
    }).filter((r) => matches(r.name, r.address));
    rows.sort((a, b) => (b.c?.self ? 1 : 0) - (a.c?.self ? 1 : 0) || b.since - a.since);
    $('conns-count').textContent = S.entries.length || '';
    $('conns-aside').innerHTML = S.stats ? `queued ${fmtBytes(st.queued_bytes ?? 0)} · dropped ${fmtNum(st.dropped ?? 0)} (all connections)` : '';
    const per = (v, f) => (v == null ? '<span class="muted" title="not reported per connection by the gateway">–</span>' : f(v));
    if (!rows.length) {
      $('conns-body').innerHTML = `<div class="empty">${S.entriesSeen ? 'No connection matches.' : 'Waiting for /connected_clients…'}</div>`;
    } else {
      const t = Date.now();
      const regs = registrations();
      const html = ['<table class="tbl"><thead><tr><th>Client</th><th>Transport</th><th>Address</th><th>Connected</th><th>Node · registrations</th><th class="num">Queued</th><th class="num">Drops</th></tr></thead><tbody>'];
      for (const r of rows.slice(0, CFG.maxRows)) {
        const name = r.name ? `<span class="mono">${esc(r.name)}</span>${r.c?.self ? ' <span class="chip self">this page</span>' : ''}`
          : '<span class="muted unnamed" title="Connected before this page opened. /connected_clients gives only its address and connection time; the page names such connections only when they all hold registrations of their own.">opened before this page</span>';
        let nodeCell = '<span class="muted">–</span>';
        const nodes = Array.isArray(r.e.raw.nodes) ? r.e.raw.nodes : null;
        if (nodes) nodeCell = nodes.map(nodeChip).join('');
        else if (r.name) {
          const g = regs(r.name);
          const bits = [];
          if (g.pub) bits.push(`${g.pub} pub`);
          if (g.sub) bits.push(`${g.sub} sub`);
          if (g.srv + g.act) bits.push(`${g.srv + g.act} srv`);
          nodeCell = bits.length ? `${nodeChip(r.name)} <span class="muted">${bits.join(' · ')}</span>`
            : '<span class="muted" title="Nothing registered under the connection\'s own name. Its registrations may belong to nodes it declared: the gateway does not say which connection a declared node belongs to.">none under its own name</span>';
        }
        html.push(`<tr data-client="${esc(r.name || '')}"><td>${name}</td><td>${transportPill(r.transport)}</td><td class="mono">${esc(r.address)}</td>
          <td title="${esc(new Date(r.since).toLocaleString())}">${fmtDur(t - r.since)}</td><td>${nodeCell}</td>
          <td class="num">${per(r.e.raw.queued_bytes, fmtBytes)}</td><td class="num">${per(r.e.raw.dropped, fmtNum)}</td></tr>`);
      }
      html.push('</tbody></table>');
      const unnamed = rows.filter((r) => !r.name).length;
      if (unnamed) html.push(`<p class="note">${plural(unnamed, 'connection')} opened before this page cannot be named: the gateway lists their address and connection time, not their client name or transport. Connections made while the page is open are named from the graph events.</p>`);
      $('conns-body').innerHTML = html.join('');
    }
    const closed = S.closed.filter((c) => matches(c.name, c.address, c.reason));
    if (!closed.length) {
      $('closed-body').innerHTML = '<div class="empty">None since this page opened.</div>';
    } else {
      const html = ['<table class="tbl"><thead><tr><th>At</th><th>Client</th><th>Transport</th><th>Address</th><th>Lasted</th><th>Reason</th></tr></thead><tbody>'];
      for (const c of closed) {
        html.push(`<tr data-closed="${esc(c.name)}"><td class="mono">${esc(fmtClock(c.at))}</td><td class="mono">${esc(c.name)}</td><td>${transportPill(c.transport)}</td>
          <td class="mono">${esc(c.address || '')}</td><td>${c.since ? fmtDur(c.at - c.since) : '<span class="muted">?</span>'}</td><td>${reasonPill(c.reason)}</td></tr>`);
      }
      html.push('</tbody></table>');
      $('closed-body').innerHTML = html.join('');
    }
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
    const actions = [...S.actions.values()].filter((a) => matches(a.name, a.type, a.node)).sort((a, b) => a.name.localeCompare(b.name));
    $('actions-count').textContent = actions.length || '';
    $('actions-body').innerHTML = actions.length
      ? `<table class="tbl"><thead><tr><th>Action</th><th>Server</th></tr></thead><tbody>${actions.slice(0, CFG.maxRows).map((a) =>
        `<tr><td><div class="name">${esc(a.name)}</div><div class="type">${esc(a.type || '—')}</div></td><td>${a.node ? nodeChip(a.node) : '<span class="muted" title="rosapi does not name an action server\'s node; known only for actions advertised while this page was open">unknown</span>'}</td></tr>`).join('')}</tbody></table>`
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
    const nodes = allNodes().filter((n) => (S.showSystem || (n !== '/rosgate' && n !== S.self)) && matches(n)).sort();
    $('nodes-count').textContent = nodes.length;
    if (!nodes.length) { $('nodes-body').innerHTML = '<div class="empty">No nodes.</div>'; return; }
    const html = ['<table class="tbl"><thead><tr><th>Node</th><th>Kind</th><th class="num">Pub</th><th class="num">Sub</th><th class="num">Srv</th><th class="num">Act</th><th class="num">Params</th></tr></thead><tbody>'];
    for (const n of nodes.slice(0, CFG.maxRows)) {
      const g = regs(n);
      const srv = g.srv + (S.showSystem ? g.sys : 0);
      const kind = n === '/rosgate' ? '<span class="pill neutral">gateway</span>' : n === S.self ? '<span class="pill neutral">this page</span>'
        : CONN_NODE.test(n) ? `<span class="pill ${transportOf(n)}" title="a connection that declared no node">connection</span>` : '<span class="pill ok">declared</span>';
      const z = (v) => `<td class="num${v ? '' : ' zero'}">${v}</td>`;
      html.push(`<tr><td class="mono">${esc(n)}</td><td>${kind}</td>${z(g.pub)}${z(g.sub)}${z(srv)}${z(g.act)}${z(g.params)}</tr>`);
    }
    html.push('</tbody></table>');
    $('nodes-body').innerHTML = html.join('');
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
    $('health-aside').textContent = `refreshed every ${CFG.statsPeriodMs / 1000} s`;
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
    switch (ev.event) {
      case 'node_added': return ['add', `node ${N(ev.node)}`];
      case 'node_removed': return ['del', `node ${N(ev.node)}`];
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
    // The page's own subscriptions are not news (unless "system" is ticked).
    const items = S.feed.filter((f) => (S.showSystem || !S.self || f.ev.node !== S.self) &&
      matches(f.ev.node, f.ev.topic, f.ev.service, f.ev.action, f.ev.client));
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
      if (S.expanded.has(topic)) unwatch(topic); else watch(topic);
    };
    $('topics-body').addEventListener('click', (e) => {
      if (e.target.closest('.detail')) return;
      toggle(e.target.closest('tr.topic'));
    });
    $('topics-body').addEventListener('keydown', (e) => {
      if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); toggle(e.target.closest('tr.topic')); }
    });
    fetch('/version').then((r) => r.json()).then((v) => {
      $('version').textContent = `v${v.server?.version ?? '?'} · rosbridge v${v.protocol?.major ?? 2}`;
    }).catch(() => {});
    const dom = new URLSearchParams(location.search).get('domain');
    if (dom) $('version').textContent += ` · domain ${dom}`;
    setInterval(readStats, CFG.statsPeriodMs);
    setInterval(tickRates, 1000);
    scheduleRender('all');
    bridge.connect();
  }

  // Exposed for tests and for the curious (read-only use).
  window.rosgateDashboard = { state: S, config: CFG };
  wire();
})();
