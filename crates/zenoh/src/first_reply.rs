//! [`FirstReply`]: a query's callback that acts on its first reply, or on
//! the query's end without one. Every call and goal request this crate
//! sends through Zenoh ends in exactly one answer this way.

use std::sync::Mutex;

use zenoh::query::Reply;

/// Calls its function once: with the first reply of a query, or with
/// `None` when the query ends without one (Zenoh drops the callback that
/// holds this when it finalises the query: the caller's timeout, or the
/// answering side gone).
pub(crate) struct FirstReply<F: FnOnce(Option<&Reply>)>(Mutex<Option<F>>);

impl<F: FnOnce(Option<&Reply>)> FirstReply<F> {
    pub(crate) fn new(f: F) -> Self {
        FirstReply(Mutex::new(Some(f)))
    }

    /// A reply came: the first one is acted on, later ones are not.
    pub(crate) fn on(&self, r: &Reply) {
        let f = self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(f) = f {
            f(Some(r));
        }
    }
}

impl<F: FnOnce(Option<&Reply>)> Drop for FirstReply<F> {
    fn drop(&mut self) {
        let f = self.0.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(f) = f {
            f(None);
        }
    }
}
