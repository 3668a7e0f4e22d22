//! [`LinkQueue`]: what a network's threads learn for the ROS 2 link (graph
//! events, samples, replies, query ends, feedback, ROS 2 clients'
//! requests with the handle the link's reply answers), queued in arrival
//! order for the loop thread, which feeds them to the link at the start of
//! each turn ([`LinkQueue::feed`]; the link itself is the loop's, with no
//! lock).
//!
//! Invariants:
//! - a reply or a query's end is never dropped (at most one per query the
//!   link made, and the link bounds those); feedback past
//!   [`MAX_QUEUED_FEEDBACK`] and graph events past [`MAX_LINK_EVENTS`] are
//!   dropped and counted: a call or goal to a server whose announcement
//!   was missed fails once;
//! - a sample waits here holding its room in the loop's inbox budget
//!   ([`Inbox::reserve_sample`]), given back when the turn takes it: past
//!   the budget it is dropped and counted on the network's thread, so a
//!   flood never stalls the loop nor grows this queue;
//! - a turn takes at most [`SAMPLES_PER_TURN`] samples; the rest, and the
//!   events after them, wait in order for the next turn;
//! - a request past [`MAX_QUEUED_REQUESTS`] gets its error at once, on the
//!   network's thread ([`Refuse`]): none is dropped unanswered.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use rosgate_core::nodes::Domain;
use rosgate_ros2::link::{self, Event, InQuery, Link, Reply as LinkReply};

use crate::Inbox;

/// Events for the link waiting for the loop's next turn, in all.
pub const MAX_LINK_EVENTS: usize = 4 * link::MAX_ENTITIES;

/// Feedback samples waiting for the loop's next turn; more are dropped
/// (feedback is sheddable, as on a client's queue).
pub const MAX_QUEUED_FEEDBACK: usize = 4096;

/// Samples from ROS 2 the link takes per loop turn (a flood cannot make
/// one turn long); the rest, and the events after them, wait in order for
/// the next turn, holding their room in the loop's inbox budget.
pub const SAMPLES_PER_TURN: usize = 1024;

/// ROS 2 clients' requests waiting for the loop's next turn; more get an
/// error reply at once.
pub const MAX_QUEUED_REQUESTS: usize = 4096;

/// A ROS 2 client's request handle (how the transport replies to it): what
/// the queue does with one it cannot take.
pub trait Refuse {
    /// Answers the request with an error, at once.
    fn refuse(self, why: String);
}

/// What a network's threads hand the loop for the link.
pub enum Inbound<R> {
    Event(Event),
    /// A sample (an `Event::Sample`) holding `bytes` of the loop's inbox
    /// budget.
    Sample {
        event: Event,
        bytes: usize,
    },
    /// A ROS 2 client's request, with the handle the link's reply answers.
    Request {
        to: R,
        domain: Domain,
        name: String,
        request: link::Request,
    },
}

struct Inner<R> {
    events: Vec<Inbound<R>>,
    feedback: usize,
    requests: usize,
    dropped: u64,
}

/// See the module docs.
pub struct LinkQueue<R> {
    inner: Mutex<Inner<R>>,
    inbox: Arc<Inbox>,
}

impl<R: Refuse> LinkQueue<R> {
    /// A queue whose samples take room in `inbox`'s budget and whose
    /// events wake the loop through it.
    pub fn new(inbox: Arc<Inbox>) -> LinkQueue<R> {
        LinkQueue {
            inner: Mutex::new(Inner {
                events: Vec::new(),
                feedback: 0,
                requests: 0,
                dropped: 0,
            }),
            inbox,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<R>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The loop's inbox (budget, wake-ups, drop counts).
    pub fn inbox(&self) -> &Arc<Inbox> {
        &self.inbox
    }

    /// An event for the link: queued for the loop's next turn, which is
    /// woken.
    pub fn event(&self, e: Event) {
        let mut q = self.lock();
        let feedback = matches!(e, Event::Feedback { .. });
        let keep = match &e {
            Event::Reply { .. } | Event::QueryEnd { .. } => true,
            Event::Feedback { .. } => q.feedback < MAX_QUEUED_FEEDBACK,
            _ => q.events.len() < MAX_LINK_EVENTS,
        };
        if !keep {
            q.dropped += 1;
            return;
        }
        q.feedback += usize::from(feedback);
        q.events.push(Inbound::Event(e));
        drop(q);
        self.inbox.wake();
    }

    /// A ROS 2 sample: queued for the link within the loop's inbox budget
    /// (or dropped, counted, past it).
    pub fn sample(&self, event: Event) {
        let bytes = match &event {
            Event::Sample { payload, .. } => payload.len(),
            _ => 0,
        };
        if !self.inbox.reserve_sample(bytes) {
            return;
        }
        self.lock().events.push(Inbound::Sample { event, bytes });
        self.inbox.wake();
    }

    /// A ROS 2 client's request: queued with its handle for the link, or
    /// (the queue full) refused at once.
    pub fn request(&self, to: R, domain: Domain, name: &str, request: link::Request) {
        let mut q = self.lock();
        if q.requests >= MAX_QUEUED_REQUESTS {
            q.dropped += 1;
            drop(q);
            to.refuse("the gateway has too many requests from ROS 2 waiting".into());
            return;
        }
        q.requests += 1;
        q.events.push(Inbound::Request {
            to,
            domain,
            name: name.to_string(),
            request,
        });
        drop(q);
        self.inbox.wake();
    }

    /// A reply to the link's query `query`, or its end without one.
    pub fn reply(&self, query: link::QueryId, r: Option<Result<LinkReply, String>>) {
        let e = match r {
            None => Event::QueryEnd { query },
            Some(Ok(reply)) => Event::Reply { query, reply },
            Some(Err(why)) => Event::Reply {
                query,
                reply: LinkReply::Refused(why),
            },
        };
        self.event(e);
    }

    /// Events dropped before the link saw them (for the status).
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    /// The events waiting, in arrival order, up to (not including) the
    /// sample past [`SAMPLES_PER_TURN`]: the rest stay, in order, for the
    /// next turn (and whether some stay).
    pub fn take(&self) -> (Vec<Inbound<R>>, bool) {
        let mut q = self.lock();
        let mut samples = 0;
        let cut = q
            .events
            .iter()
            .position(|e| {
                samples += usize::from(matches!(e, Inbound::Sample { .. }));
                samples > SAMPLES_PER_TURN
            })
            .unwrap_or(q.events.len());
        let rest = q.events.split_off(cut);
        let taken = std::mem::replace(&mut q.events, rest);
        q.feedback = q
            .events
            .iter()
            .filter(|e| matches!(e, Inbound::Event(Event::Feedback { .. })))
            .count();
        q.requests = q
            .events
            .iter()
            .filter(|e| matches!(e, Inbound::Request { .. }))
            .count();
        let more = !q.events.is_empty();
        (taken, more)
    }

    /// One turn's events into the link, in order: samples give their room
    /// back, requests are numbered (`next`) and kept in `replying` until
    /// the link's reply; then the tick. The loop is woken again when
    /// events stay for the next turn.
    pub fn feed(
        &self,
        link: &mut Link,
        replying: &mut HashMap<InQuery, R>,
        next: &mut u64,
        now: Instant,
    ) {
        let (events, more) = self.take();
        if more {
            self.inbox.wake();
        }
        for e in events {
            match e {
                Inbound::Event(e) => link.handle(e),
                Inbound::Sample { event, bytes } => {
                    // Taken: its room in the loop's inbox budget is free.
                    self.inbox.release_sample(bytes);
                    link.handle(event);
                }
                Inbound::Request {
                    to,
                    domain,
                    name,
                    request,
                } => {
                    *next += 1;
                    let query = InQuery(*next);
                    replying.insert(query, to);
                    link.handle(Event::Request {
                        now,
                        query,
                        domain: u32::from(domain),
                        name,
                        request,
                    });
                }
            }
        }
        link.handle(Event::Tick(now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoReply;
    impl Refuse for NoReply {
        fn refuse(self, _why: String) {}
    }

    fn queue() -> LinkQueue<NoReply> {
        let inbox = Inbox::new(Arc::new(|_: crate::Job| true));
        LinkQueue::new(Arc::new(inbox))
    }

    fn sample(n: u8) -> Inbound<NoReply> {
        Inbound::Sample {
            event: Event::Sample {
                domain: 0,
                topic: "/t".into(),
                publisher: Some([n; 16]),
                ty: "std_msgs/msg/String".into(),
                hash: String::new(),
                payload: vec![n],
            },
            bytes: 1,
        }
    }

    fn gone(n: u8) -> Inbound<NoReply> {
        Inbound::Event(Event::Gone([n; 16]))
    }

    fn feedback() -> Inbound<NoReply> {
        Inbound::Event(Event::Feedback {
            domain: 0,
            action: "/a".into(),
            uuid: [0; 16],
            payload: Vec::new(),
        })
    }

    #[test]
    fn a_turn_takes_samples_per_turn_samples_and_leaves_the_rest_in_order() {
        let q = queue();
        {
            let mut q = q.lock();
            q.events.push(gone(1));
            for _ in 0..SAMPLES_PER_TURN {
                q.events.push(sample(2));
            }
            // Past the allowance: this sample, and what came after it, wait.
            q.events.push(sample(3));
            q.events.push(gone(4));
            q.events.push(feedback());
            q.feedback = 1;
        }
        let (taken, more) = q.take();
        assert!(more);
        assert_eq!(taken.len(), 1 + SAMPLES_PER_TURN);
        assert!(matches!(taken[0], Inbound::Event(Event::Gone(g)) if g == [1; 16]));
        {
            let q = q.lock();
            assert_eq!(q.events.len(), 3);
            assert!(
                matches!(&q.events[0], Inbound::Sample { event: Event::Sample { publisher, .. }, .. } if *publisher == Some([3; 16]))
            );
            assert!(matches!(q.events[1], Inbound::Event(Event::Gone(g)) if g == [4; 16]));
            assert_eq!(q.feedback, 1, "the feedback still waiting is still counted");
        }
        let (taken, more) = q.take();
        assert!(!more);
        assert_eq!(taken.len(), 3);
        assert_eq!(q.lock().feedback, 0);
        assert!(q.lock().events.is_empty());
    }

    #[test]
    fn replies_are_never_dropped_and_feedback_is_bounded() {
        let q = queue();
        for _ in 0..MAX_QUEUED_FEEDBACK + 1 {
            if let Inbound::Event(e) = feedback() {
                q.event(e);
            }
        }
        q.reply(link::QueryId(1), None);
        assert_eq!(q.dropped(), 1);
        let (taken, _) = q.take();
        assert_eq!(taken.len(), MAX_QUEUED_FEEDBACK + 1);
    }
}
