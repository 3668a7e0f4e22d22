//! The Zenoh worker: one thread that makes and owns every Zenoh
//! declaration the loop asks for (subscribers, queryables, liveliness
//! tokens and subscribers, advanced publishers) and drops each, which
//! undeclares it, when the loop says so (issue 24).
//!
//! Why a thread: a declaration, and the drop of its handle, takes Zenoh's
//! routing and declaration locks. While Zenoh's receiving thread digests a
//! burst from a peer (a session holding 20 000 liveliness tokens leaving:
//! `scripts/stress.sh fakenodes`) it holds them, and a loop that declared
//! itself waited as long (about 2 s). The loop only queues commands here
//! ([`Decls`]); it never waits for Zenoh, nor for this thread: the queue's
//! lock is held for a push or a pop, never across a Zenoh call.
//! Declarations made at start-up, before the loop runs, are made at once
//! (a failure stops start-up): the gateways peer hands its handles over
//! ([`Decls::adopt`]); the ROS 2 peer's node tokens and graph watchers
//! stay in `ros2/` and go when the session closes.
//!
//! Puts and gets (queries) stay on the loop thread: they are the hot path,
//! take only Zenoh's routing tables for reading, are made with
//! `CongestionControl::Drop` so a slow network sheds rather than blocks, and
//! a queue between the loop and the network would add a copy and a hop to
//! every sample, call and reply. Two exceptions: a put through an
//! advanced publisher (rmw_zenoh's transient local cache), which exists
//! only on this thread, goes as a command ([`Decls::with`]), in order
//! after the publisher's declaration, so the first message reaches the
//! cache; and this gateway's graph announcement (at most every
//! `GRAPH_INTERVAL_MS`, [`Decls::run`]): a put waits for Zenoh's routing
//! tables, which Zenoh's receiving thread holds for write while it digests
//! a departing peer's declarations (seconds, as for the declarations
//! above), and the loop sampled in `fakenodes` waited there once
//! declarations had moved.
//!
//! Invariants:
//! - commands run in the order the loop queued them: a declaration before
//!   its uses and its undeclaration, whatever the thread's delays; a get
//!   that needs one goes through [`Decls::after`];
//! - a declaration's id is the loop's ([`Declared`]): the loop's tables
//!   keep ids, this thread keeps the handles, one per live id;
//! - an undeclaration is never refused nor dropped (dropping a [`Declared`]
//!   queues it); declarations and uses are refused (logged, counted) while
//!   [`MAX_ZENOH_COMMANDS`] commands wait, so the queue holds at most that
//!   many plus one undeclaration per handle, and the handles are bounded
//!   by the loop's own tables;
//! - [`Worker::stop`] drops every handle (this gateway's tokens go at once)
//!   and joins the thread within [`WORKER_STOP_MS`].

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use zenoh::Session;

/// Commands. Declarations and uses waiting for the worker; past it, further
/// ones are refused (the declaration fails as if Zenoh had refused it:
/// logged, counted in the status as `declarations_refused`).
/// Undeclarations are queued past it (one per live handle at most).
pub const MAX_ZENOH_COMMANDS: usize = 1 << 16;

/// Milliseconds. How long closing the session waits for the worker to
/// drop its handles and end; past it, the session closes anyway (which
/// undeclares what is left) and the thread is left to end by itself.
pub const WORKER_STOP_MS: u64 = 2000;

/// A handle the worker owns, type-erased.
type Handle = Box<dyn Any + Send>;
type Make = Box<dyn FnOnce(&Session) -> zenoh::Result<Handle> + Send>;
type Use = Box<dyn FnOnce(&mut Handle) + Send>;

enum Cmd {
    Declare {
        id: u64,
        what: String,
        make: Make,
    },
    #[cfg_attr(not(feature = "ros2"), allow(dead_code))]
    Use {
        id: u64,
        f: Use,
    },
    Undeclare {
        id: u64,
    },
    Run {
        f: Box<dyn FnOnce(&Session) + Send>,
    },
    Stop,
}

#[derive(Default)]
struct State {
    cmds: VecDeque<Cmd>,
    /// Declarations and uses refused (the queue was full).
    refused: u64,
    /// Declarations Zenoh refused (on the worker).
    failed: u64,
    /// Handles the worker holds.
    held: usize,
    /// The worker is running a command.
    busy: bool,
    stopped: bool,
}

struct Queue {
    state: Mutex<State>,
    ready: Condvar,
    next_id: AtomicU64,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic on the worker while it held the lock (it holds it only
        // to pop) leaves the queue as it was.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `cmd`; false when refused (a declaration or use while the
    /// queue is full, or anything after the worker stopped).
    fn push(&self, cmd: Cmd) -> bool {
        let mut s = self.lock();
        if s.stopped {
            return false;
        }
        let bounded = matches!(cmd, Cmd::Declare { .. } | Cmd::Use { .. } | Cmd::Run { .. });
        if bounded && s.cmds.len() >= MAX_ZENOH_COMMANDS {
            s.refused += 1;
            return false;
        }
        s.cmds.push_back(cmd);
        drop(s);
        self.ready.notify_one();
        true
    }
}

/// The loop's way to the worker: declarations queued, each given an id
/// the loop keeps. Cloned into each peer.
#[derive(Clone)]
pub(crate) struct Decls(Arc<Queue>);

/// A declaration the loop asked for, by id. Dropping it undeclares (the
/// worker drops the handle). What the loop's tables keep instead of
/// Zenoh's handles.
pub(crate) struct Declared {
    id: u64,
    queue: Arc<Queue>,
    /// Refused before it was queued: nothing to undeclare.
    queued: bool,
}

impl std::fmt::Debug for Declared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Declared({})", self.id)
    }
}

impl Drop for Declared {
    fn drop(&mut self) {
        if self.queued {
            self.queue.push(Cmd::Undeclare { id: self.id });
        }
    }
}

impl Decls {
    /// Queues a declaration: `make` runs on the worker with the session,
    /// and the handle it returns lives there until the [`Declared`] is
    /// dropped. `what` names it in the log if Zenoh refuses it (or the
    /// queue is full: then it is logged at once and never made).
    pub(crate) fn declare<T, F>(&self, what: impl Into<String>, make: F) -> Declared
    where
        T: Send + 'static,
        F: FnOnce(&Session) -> zenoh::Result<T> + Send + 'static,
    {
        let id = self.0.next_id.fetch_add(1, Ordering::Relaxed);
        let what = what.into();
        let make: Make = Box::new(move |s: &Session| make(s).map(|h| Box::new(h) as Handle));
        let queued = self.0.push(Cmd::Declare {
            id,
            what: what.clone(),
            make,
        });
        if !queued {
            rosgate_core::log!(
                Warn,
                "{what}: refused, {MAX_ZENOH_COMMANDS} Zenoh declarations are waiting"
            );
        }
        Declared {
            id,
            queue: self.0.clone(),
            queued,
        }
    }

    /// Queues `f` to run once on the worker with the session (after
    /// everything queued before); false when refused.
    pub(crate) fn run(&self, f: impl FnOnce(&Session) + Send + 'static) -> bool {
        self.0.push(Cmd::Run { f: Box::new(f) })
    }

    /// Runs `f` now, on the loop, if the worker has run every command
    /// queued before; else queues it to run on the worker after them. For a
    /// get that needs a declaration queued just before (a goal whose
    /// feedback subscriber was just declared: its first feedback would be
    /// lost), without waiting for Zenoh while the worker does. False when
    /// refused (then `f` is dropped unrun).
    #[cfg_attr(not(feature = "ros2"), allow(dead_code))]
    pub(crate) fn after(&self, f: impl FnOnce() + Send + 'static) -> bool {
        // Only the loop queues commands, so nothing new can be queued
        // between this check and `f`.
        if self.idle() {
            f();
            return true;
        }
        self.run(move |_: &Session| f())
    }

    /// Hands a handle made elsewhere (at start-up, where a failure must
    /// stop the gateway) to the worker, which then owns it.
    pub(crate) fn adopt<T: Send + 'static>(&self, what: impl Into<String>, handle: T) -> Declared {
        self.declare(what, move |_: &Session| Ok(handle))
    }

    /// Queues `f` to run on the worker with the handle of `d` (made as a
    /// `T`), after everything queued before. False when refused (the
    /// queue is full); `f` does not run either if the declaration failed.
    #[cfg_attr(not(feature = "ros2"), allow(dead_code))]
    pub(crate) fn with<T, F>(&self, d: &Declared, f: F) -> bool
    where
        T: 'static,
        F: FnOnce(&T) + Send + 'static,
    {
        if !d.queued {
            return false;
        }
        let f: Use = Box::new(move |h: &mut Handle| {
            if let Some(t) = h.downcast_ref::<T>() {
                f(t);
            }
        });
        self.0.push(Cmd::Use { id: d.id, f })
    }

    /// Whether the worker ran every command queued.
    fn idle(&self) -> bool {
        let s = self.0.lock();
        s.cmds.is_empty() && !s.busy
    }

    /// The worker's figures for `/rosgate/federation`: handles held,
    /// commands waiting, declarations refused (queue full) and failed.
    pub(crate) fn status(&self) -> serde_json::Value {
        let s = self.0.lock();
        serde_json::json!({
            "declared": s.held,
            "queued": s.cmds.len(),
            "declarations_refused": s.refused,
            "declarations_failed": s.failed,
        })
    }
}

/// The worker thread and the loop's way to it. See the module docs.
pub(crate) struct Worker {
    decls: Decls,
    thread: Option<std::thread::JoinHandle<()>>,
    done: mpsc::Receiver<()>,
}

impl Worker {
    /// Starts the worker thread on `session`.
    pub(crate) fn start(session: &Session) -> Result<Worker, String> {
        let queue = Arc::new(Queue {
            state: Mutex::new(State::default()),
            ready: Condvar::new(),
            next_id: AtomicU64::new(0),
        });
        let (tx, done) = mpsc::channel();
        let (q, s) = (queue.clone(), session.clone());
        let thread = std::thread::Builder::new()
            .name("rosgate-zenoh-decl".into())
            .spawn(move || {
                run(&s, &q);
                let _ = tx.send(());
            })
            .map_err(|e| format!("zenoh: cannot start the declaration thread: {e}"))?;
        Ok(Worker {
            decls: Decls(queue),
            thread: Some(thread),
            done,
        })
    }

    /// The loop's way to the worker.
    pub(crate) fn decls(&self) -> Decls {
        self.decls.clone()
    }

    /// Drops every handle (after the commands queued before) and ends the
    /// thread, waiting at most [`WORKER_STOP_MS`].
    pub(crate) fn stop(mut self) {
        self.decls.0.push(Cmd::Stop);
        let ended = self
            .done
            .recv_timeout(Duration::from_millis(WORKER_STOP_MS))
            .is_ok();
        match self.thread.take() {
            Some(t) if ended => {
                let _ = t.join();
            }
            _ => rosgate_core::log!(
                Warn,
                "zenoh: the declaration thread did not end within {WORKER_STOP_MS} ms"
            ),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Not stopped through `stop` (an error path): end the thread
        // without waiting for it.
        if self.thread.is_some() {
            self.decls.0.push(Cmd::Stop);
        }
    }
}

/// The worker thread: commands in order until `Stop`.
fn run(session: &Session, queue: &Queue) {
    let mut held: HashMap<u64, Handle> = HashMap::new();
    loop {
        let cmd = {
            let mut s = queue.lock();
            loop {
                if let Some(c) = s.cmds.pop_front() {
                    s.busy = true;
                    break c;
                }
                s = queue.ready.wait(s).unwrap_or_else(|e| e.into_inner());
            }
        };
        match cmd {
            Cmd::Declare { id, what, make } => match make(session) {
                Ok(h) => {
                    held.insert(id, h);
                }
                Err(e) => {
                    queue.lock().failed += 1;
                    rosgate_core::log!(Warn, "{what}: {e}");
                }
            },
            Cmd::Use { id, f } => {
                if let Some(h) = held.get_mut(&id) {
                    f(h);
                }
            }
            Cmd::Undeclare { id } => {
                drop(held.remove(&id));
            }
            Cmd::Run { f } => f(session),
            Cmd::Stop => break,
        }
        let mut s = queue.lock();
        s.held = held.len();
        s.busy = false;
    }
    let mut s = queue.lock();
    s.stopped = true;
    s.cmds.clear();
    drop(s);
    // Undeclares everything this gateway declared.
    drop(held);
    let mut s = queue.lock();
    s.held = 0;
    s.busy = false;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;
    use zenoh::sample::Sample;
    use zenoh::Wait;

    const WAIT: Duration = Duration::from_secs(10);

    /// A session on loopback only, reaching nobody.
    fn session() -> Session {
        let mut c = zenoh::Config::default();
        c.insert_json5("listen/endpoints", r#"["tcp/127.0.0.1:0"]"#)
            .unwrap();
        c.insert_json5("scouting/multicast/enabled", "false")
            .unwrap();
        zenoh::open(c).wait().unwrap()
    }

    /// Returns once the worker ran everything queued before.
    fn settle(decls: &Decls) {
        let deadline = Instant::now() + WAIT;
        while !decls.idle() {
            assert!(Instant::now() < deadline, "the worker did not settle");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn held(decls: &Decls) -> u64 {
        decls.status()["declared"].as_u64().unwrap()
    }

    #[test]
    fn a_subscriber_declared_through_the_worker_receives() {
        let s = session();
        let w = Worker::start(&s).unwrap();
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let _sub = w.decls().declare("test subscriber", move |s: &Session| {
            s.declare_subscriber("rosgate/test/worker/data")
                .callback(move |x: Sample| {
                    let _ = tx.lock().unwrap().send(x.payload().to_bytes().to_vec());
                })
                .wait()
        });
        let deadline = Instant::now() + WAIT;
        let got = loop {
            s.put("rosgate/test/worker/data", "hello").wait().unwrap();
            if let Ok(v) = rx.recv_timeout(Duration::from_millis(50)) {
                break v;
            }
            assert!(
                Instant::now() < deadline,
                "no sample reached the subscriber"
            );
        };
        assert_eq!(got, b"hello");
        w.stop();
        let _ = s.close().wait();
    }

    #[test]
    fn declared_then_dropped_at_once_leaves_nothing_declared() {
        let s = session();
        let w = Worker::start(&s).unwrap();
        let d = w.decls();
        for i in 0..200 {
            let key = format!("rosgate/test/worker/gone/{i}");
            drop(d.declare("test token", move |s: &Session| {
                s.liveliness().declare_token(key).wait()
            }));
        }
        let _kept = d.declare("test token", |s: &Session| {
            s.liveliness()
                .declare_token("rosgate/test/worker/kept")
                .wait()
        });
        settle(&d);
        assert_eq!(held(&d), 1, "only the kept token is held");
        let replies = s
            .liveliness()
            .get("rosgate/test/worker/**")
            .timeout(Duration::from_secs(2))
            .wait()
            .unwrap();
        let mut alive = Vec::new();
        while let Ok(r) = replies.recv() {
            if let Ok(sample) = r.result() {
                alive.push(sample.key_expr().to_string());
            }
        }
        assert_eq!(alive, vec!["rosgate/test/worker/kept".to_string()]);
        w.stop();
        let _ = s.close().wait();
    }

    #[test]
    fn uses_and_runs_run_in_order_after_their_declaration() {
        let s = session();
        let w = Worker::start(&s).unwrap();
        let d = w.decls();
        let seen = Arc::new(Mutex::new(Vec::<u32>::new()));
        let v = seen.clone();
        let h = d.declare("a list", move |_: &Session| Ok(v));
        for i in 0..100u32 {
            if i % 10 == 0 {
                let v = seen.clone();
                assert!(d.run(move |_: &Session| v.lock().unwrap().push(1000 + i)));
            }
            assert!(d.with(&h, move |l: &Arc<Mutex<Vec<u32>>>| l
                .lock()
                .unwrap()
                .push(i)));
        }
        drop(h);
        settle(&d);
        let want: Vec<u32> = (0..100)
            .flat_map(|i| (i % 10 == 0).then_some(1000 + i).into_iter().chain([i]))
            .collect();
        assert_eq!(*seen.lock().unwrap(), want);
        assert_eq!(held(&d), 0);
        w.stop();
        let _ = s.close().wait();
    }

    #[test]
    fn after_runs_at_once_when_idle_and_after_what_is_queued_otherwise() {
        let s = session();
        let w = Worker::start(&s).unwrap();
        let d = w.decls();
        settle(&d);
        let seen = Arc::new(Mutex::new(Vec::<&str>::new()));
        let v = seen.clone();
        assert!(d.after(move || v.lock().unwrap().push("now")));
        assert_eq!(*seen.lock().unwrap(), ["now"], "ran at once on this thread");
        let (go, blocked) = mpsc::channel::<()>();
        let v = seen.clone();
        let _slow = d.declare("slow", move |_: &Session| {
            let _ = blocked.recv_timeout(WAIT);
            v.lock().unwrap().push("declared");
            Ok(())
        });
        let v = seen.clone();
        assert!(d.after(move || v.lock().unwrap().push("after")));
        assert_eq!(seen.lock().unwrap().len(), 1, "waits for the declaration");
        go.send(()).unwrap();
        settle(&d);
        assert_eq!(*seen.lock().unwrap(), ["now", "declared", "after"]);
        w.stop();
        let _ = s.close().wait();
    }

    #[test]
    fn a_full_queue_refuses_declarations_but_never_undeclarations() {
        let s = session();
        let w = Worker::start(&s).unwrap();
        let d = w.decls();
        // Holds the worker as a Zenoh declaration lock held for long would.
        let (go, blocked) = mpsc::channel::<()>();
        let (started, running) = mpsc::channel::<()>();
        let blocker = d.declare("blocker", move |_: &Session| {
            let _ = started.send(());
            let _ = blocked.recv_timeout(WAIT);
            Ok(())
        });
        running.recv_timeout(WAIT).unwrap();
        let mut ids: Vec<Declared> = (0..MAX_ZENOH_COMMANDS)
            .map(|_| d.declare("filler", |_: &Session| Ok(())))
            .collect();
        let refused = d.declare("one too many", |_: &Session| Ok(()));
        assert_eq!(d.status()["declarations_refused"], 1);
        assert!(!d.with(&ids[0], |_: &()| {}), "a use is refused too");
        drop(refused);
        ids.clear();
        drop(blocker);
        assert!(
            d.status()["queued"].as_u64().unwrap() > MAX_ZENOH_COMMANDS as u64,
            "every undeclaration was queued past the bound"
        );
        go.send(()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !d.idle() {
            assert!(Instant::now() < deadline, "the worker did not drain");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(held(&d), 0, "every declaration was undeclared");
        w.stop();
        let _ = s.close().wait();
    }

    #[test]
    fn stop_drops_every_handle_and_ends_the_thread() {
        let s = session();
        let w = Worker::start(&s).unwrap();
        let d = w.decls();
        let _token = d.declare("test token", |s: &Session| {
            s.liveliness()
                .declare_token("rosgate/test/worker/stop")
                .wait()
        });
        settle(&d);
        assert_eq!(held(&d), 1);
        let t = Instant::now();
        w.stop();
        assert!(t.elapsed() < Duration::from_millis(WORKER_STOP_MS));
        assert_eq!(held(&d), 0);
        // Nothing runs after the stop: a declaration is refused.
        let after = d.declare("after", |_: &Session| Ok(()));
        assert!(!d.with(&after, |_: &()| {}));
        let _ = s.close().wait();
    }
}
