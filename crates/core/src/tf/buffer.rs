//! `TfBuffer`: one domain's transform tree, as tf2's `BufferCore` keeps
//! it (github.com/ros2/geometry2, `tf2/src/buffer_core.cpp`,
//! `cache.cpp`): each child frame has one parent and a history of its
//! pose in that parent, keyed by the sample's header stamp; a lookup walks
//! both frames up to their common ancestor and composes the links at the
//! latest time all of them know (tf2's "time 0"), interpolating between
//! the two samples around it.
//!
//! Invariants:
//! - a frame holds at most [`MAX_TF_SAMPLES_PER_FRAME`] samples, none
//!   older than [`TF_CACHE_SECS`] before its newest stamp (tf2's cache
//!   time); the buffer holds at most [`MAX_TF_FRAMES`] frames and about
//!   [`MAX_TF_BUFFER_BYTES`] bytes ([`TfBuffer::bytes`]); past them new
//!   frames are refused and a frame's history gets shorter, never longer;
//! - a static frame holds one sample (the latest), used at any time, and
//!   is forgotten when its publisher goes ([`TfBuffer::forget_owner`]), as
//!   a latched `/tf_static` publisher's messages are;
//! - time is the samples' own stamps, never a clock: the buffer reads no
//!   time and is tested on made-up stamps;
//! - a walk up the tree takes at most [`MAX_TF_DEPTH`] steps, so a loop
//!   (`a -> b -> a`, which tf2 also refuses to resolve) ends in an error.

use std::collections::{HashMap, VecDeque};

use super::math::Transform;

/// History kept per dynamic frame, before its newest sample (tf2's
/// `BufferCore::DEFAULT_CACHE_TIME`, 10 s).
pub const TF_CACHE_SECS: i64 = 10;

/// Samples one dynamic frame keeps at most: 10 s at 100 Hz, twice.
pub const MAX_TF_SAMPLES_PER_FRAME: usize = 2_000;

/// Frames one domain's buffer holds.
pub const MAX_TF_FRAMES: usize = 10_000;

/// Bytes one domain's buffer holds (frames, names and samples, as
/// [`TfBuffer::bytes`] counts them).
pub const MAX_TF_BUFFER_BYTES: usize = 64 * 1024 * 1024;

/// Steps of one walk up the tree (tf2's `MAX_GRAPH_DEPTH`, 1000).
pub const MAX_TF_DEPTH: usize = 1_000;

/// Characters of a frame id.
pub const MAX_TF_FRAME_ID_CHARS: usize = 256;

/// What one sample costs in [`TfBuffer::bytes`].
const TF_SAMPLE_COST: usize = std::mem::size_of::<(i64, Transform)>();
/// What one frame costs beyond its names and samples.
const TF_FRAME_COST: usize = 160;

/// Who published a sample, for static frames' lifetime: the hub's
/// connection handle packed in a `u64`; `None` is the gateway's own side
/// (the ROS 2 graph), kept until replaced.
pub type Owner = Option<u64>;

/// One child frame.
#[derive(Debug)]
struct Frame {
    parent: Box<str>,
    is_static: bool,
    owner: Owner,
    /// Oldest first; stamps strictly increasing.
    samples: VecDeque<(i64, Transform)>,
    /// Samples received, for rates.
    received: u64,
}

/// Why a sample was not stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InsertError {
    /// An empty, over-long frame id, or a frame its own parent.
    BadFrameId(String),
    /// The buffer is full ([`MAX_TF_FRAMES`] or [`MAX_TF_BUFFER_BYTES`]).
    Full,
    /// Older than the frame's history ([`TF_CACHE_SECS`] before its newest).
    TooOld,
}

/// Why a lookup found no transform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupError {
    /// No frame of this name exists.
    UnknownFrame(String),
    /// Both frames exist but are in different trees.
    NoPath,
    /// The chain goes round (or deeper than [`MAX_TF_DEPTH`]).
    Loop,
    /// A link has no sample at the time every link knows (its history
    /// starts later).
    Extrapolation(String),
    /// The composed transform is not finite (translations near the
    /// largest double add up past it): JSON cannot carry it.
    NotFinite,
}

impl std::fmt::Display for LookupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LookupError::UnknownFrame(n) => write!(f, "frame {n:?} does not exist"),
            LookupError::NoPath => write!(f, "the frames are not connected in the tree"),
            LookupError::Loop => {
                write!(f, "the tree has a loop (or is deeper than {MAX_TF_DEPTH})")
            }
            LookupError::NotFinite => write!(f, "the composed transform is not finite"),
            LookupError::Extrapolation(n) => write!(
                f,
                "frame {n:?} has no sample at the latest time common to the chain"
            ),
        }
    }
}

/// One frame as [`TfBuffer::frames`] lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameInfo {
    pub child: String,
    pub parent: String,
    pub is_static: bool,
    /// Samples per second over the history held (0 for a static frame or
    /// a single sample).
    pub rate_hz: f64,
    /// The newest stamp, nanoseconds.
    pub newest_ns: i64,
    pub received: u64,
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct TfBuffer {
    frames: HashMap<Box<str>, Frame>,
    /// How many children name each parent: a parent-only frame (a root)
    /// exists for lookups while some child names it.
    parents: HashMap<Box<str>, usize>,
    bytes: usize,
    /// Samples not stored, for stats.
    refused: u64,
}

/// `id` without its leading `/` (tf2 ids have none; ROS 1 clients still
/// write one).
pub fn clean_id(id: &str) -> &str {
    id.strip_prefix('/').unwrap_or(id)
}

fn check_id(id: &str) -> Result<(), InsertError> {
    if id.is_empty() || id.chars().count() > MAX_TF_FRAME_ID_CHARS {
        return Err(InsertError::BadFrameId(format!(
            "frame id {:?} is empty or longer than {MAX_TF_FRAME_ID_CHARS} characters",
            id.chars().take(64).collect::<String>()
        )));
    }
    Ok(())
}

impl TfBuffer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes held (frames, names, samples).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Frames held (children; roots are counted by their children).
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Samples refused so far (full buffer, bad ids, too old).
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Stores `child`'s pose in `parent` at `stamp_ns`. A sample with the
    /// stamp of one held replaces it (as tf2 does since Humble); a new
    /// parent restarts the frame's history.
    pub fn insert(
        &mut self,
        child: &str,
        parent: &str,
        stamp_ns: i64,
        tf: Transform,
        is_static: bool,
        owner: Owner,
    ) -> Result<(), InsertError> {
        let r = self.insert_inner(
            clean_id(child),
            clean_id(parent),
            stamp_ns,
            tf,
            is_static,
            owner,
        );
        if r.is_err() {
            self.refused += 1;
        }
        r
    }

    fn insert_inner(
        &mut self,
        child: &str,
        parent: &str,
        stamp_ns: i64,
        tf: Transform,
        is_static: bool,
        owner: Owner,
    ) -> Result<(), InsertError> {
        check_id(child)?;
        check_id(parent)?;
        if child == parent {
            return Err(InsertError::BadFrameId(format!(
                "frame {child:?} cannot be its own parent"
            )));
        }
        if !self.frames.contains_key(child) {
            let cost = TF_FRAME_COST + child.len() + parent.len() + TF_SAMPLE_COST;
            if self.frames.len() >= MAX_TF_FRAMES || self.bytes + cost > MAX_TF_BUFFER_BYTES {
                return Err(InsertError::Full);
            }
            self.bytes += TF_FRAME_COST + child.len() + parent.len();
            *self.parents.entry(parent.into()).or_insert(0) += 1;
            self.frames.insert(
                child.into(),
                Frame {
                    parent: parent.into(),
                    is_static,
                    owner,
                    samples: VecDeque::new(),
                    received: 0,
                },
            );
        }
        let Some(f) = self.frames.get_mut(child) else {
            return Err(InsertError::Full);
        };
        if *f.parent != *parent || f.is_static != is_static {
            // A re-parented frame (or one switching between /tf and
            // /tf_static) starts over: old samples were in another frame.
            let old = std::mem::replace(&mut f.parent, parent.into());
            self.bytes = self.bytes + parent.len() - old.len();
            self.bytes -= f.samples.len() * TF_SAMPLE_COST;
            f.samples.clear();
            f.is_static = is_static;
            if let Some(n) = self.parents.get_mut(&old) {
                *n -= 1;
                if *n == 0 {
                    self.parents.remove(&old);
                }
            }
            *self.parents.entry(parent.into()).or_insert(0) += 1;
        }
        f.owner = owner;
        f.received += 1;
        if is_static {
            // One sample, valid at any time.
            self.bytes -= f.samples.len() * TF_SAMPLE_COST;
            f.samples.clear();
            f.samples.push_back((stamp_ns, tf));
            self.bytes += TF_SAMPLE_COST;
            return Ok(());
        }
        let newest = f.samples.back().map(|s| s.0);
        let horizon = TF_CACHE_SECS * 1_000_000_000;
        match newest {
            Some(n) if stamp_ns < n.saturating_sub(horizon) => return Err(InsertError::TooOld),
            _ => {}
        }
        // Sorted insert. Samples usually come in order: newer than the
        // newest goes to the end without a search (a binary search over a
        // 10 s history touches a dozen cache lines per sample; with 200
        // frames at 100 Hz it was a quarter of the gateway's TF time,
        // docs/performance.md "TF for the web").
        let at = if newest.is_none_or(|n| n < stamp_ns) {
            f.samples.len()
        } else {
            f.samples.partition_point(|s| s.0 < stamp_ns)
        };
        if f.samples.get(at).is_some_and(|s| s.0 == stamp_ns) {
            f.samples[at].1 = tf;
        } else {
            f.samples.insert(at, (stamp_ns, tf));
            self.bytes += TF_SAMPLE_COST;
        }
        // Prune: older than the cache time before the newest, over the
        // count, or over the buffer's bytes (this frame's history gives).
        let newest = f.samples.back().map_or(stamp_ns, |s| s.0);
        while f.samples.len() > 1
            && (f
                .samples
                .front()
                .is_some_and(|s| s.0 < newest.saturating_sub(horizon))
                || f.samples.len() > MAX_TF_SAMPLES_PER_FRAME
                || self.bytes > MAX_TF_BUFFER_BYTES)
        {
            f.samples.pop_front();
            self.bytes -= TF_SAMPLE_COST;
        }
        Ok(())
    }

    /// Forgets the static frames `owner` published (it left: a latched
    /// publisher's messages go with it). Returns how many.
    pub fn forget_owner(&mut self, owner: u64) -> usize {
        let gone: Vec<Box<str>> = self
            .frames
            .iter()
            .filter(|(_, f)| f.is_static && f.owner == Some(owner))
            .map(|(n, _)| n.clone())
            .collect();
        for n in &gone {
            self.remove(n);
        }
        gone.len()
    }

    /// Forgets every dynamic frame (nobody looks them up any more; the
    /// next reader starts from fresh samples). Static frames stay.
    pub fn drop_dynamic(&mut self) {
        let gone: Vec<Box<str>> = self
            .frames
            .iter()
            .filter(|(_, f)| !f.is_static)
            .map(|(n, _)| n.clone())
            .collect();
        for n in &gone {
            self.remove(n);
        }
    }

    fn remove(&mut self, child: &str) {
        let Some(f) = self.frames.remove(child) else {
            return;
        };
        self.bytes -=
            TF_FRAME_COST + child.len() + f.parent.len() + f.samples.len() * TF_SAMPLE_COST;
        if let Some(n) = self.parents.get_mut(&f.parent) {
            *n -= 1;
            if *n == 0 {
                self.parents.remove(&f.parent);
            }
        }
    }

    /// Whether `id` names a frame (a child, or a parent some child names).
    pub fn knows(&self, id: &str) -> bool {
        let id = clean_id(id);
        self.frames.contains_key(id) || self.parents.contains_key(id)
    }

    /// `[id, parent, grandparent, ..., root]`.
    fn chain<'a>(&'a self, id: &'a str) -> Result<Vec<&'a str>, LookupError> {
        let mut out = vec![id];
        let mut at = id;
        while let Some(f) = self.frames.get(at) {
            if out.len() > MAX_TF_DEPTH {
                return Err(LookupError::Loop);
            }
            at = &f.parent;
            out.push(at);
        }
        Ok(out)
    }

    /// `source`'s pose in `target` (tf2's `lookupTransform(target,
    /// source, 0)`): the transform taking points in `source` to `target`,
    /// at the latest time all links of the chain know, and that time (0
    /// when every link is static). The same frame twice is the identity
    /// even if unknown, as tf2 answers it before validating the ids.
    pub fn lookup(&self, target: &str, source: &str) -> Result<(Transform, i64), LookupError> {
        let (target, source) = (clean_id(target), clean_id(source));
        if target == source {
            let t = self
                .frames
                .get(target)
                .and_then(|f| f.samples.back())
                .map_or(0, |s| s.0);
            return Ok((Transform::IDENTITY, t));
        }
        for id in [target, source] {
            if !self.knows(id) {
                return Err(LookupError::UnknownFrame(id.to_string()));
            }
        }
        let up_source = self.chain(source)?;
        let up_target = self.chain(target)?;
        let Some((ti, anc)) = up_target
            .iter()
            .enumerate()
            .find(|(_, t)| up_source.contains(t))
        else {
            return Err(LookupError::NoPath);
        };
        let si = up_source.iter().position(|s| s == anc).unwrap_or(0);
        // Links: the frames below the common ancestor on each side.
        let links_s = &up_source[..si];
        let links_t = &up_target[..ti];
        let frames = || {
            links_s
                .iter()
                .chain(links_t.iter())
                .filter_map(|n| self.frames.get(*n))
        };
        let time = frames()
            .filter(|f| !f.is_static)
            .filter_map(|f| f.samples.back().map(|s| s.0))
            .min();
        let link = |n: &str| -> Result<Transform, LookupError> {
            let f = self
                .frames
                .get(n)
                .ok_or_else(|| LookupError::UnknownFrame(n.to_string()))?;
            sample_at(f, time).ok_or_else(|| LookupError::Extrapolation(n.to_string()))
        };
        let mut anc_source = Transform::IDENTITY;
        for n in links_s.iter().rev() {
            anc_source = anc_source.compose(&link(n)?);
        }
        let mut anc_target = Transform::IDENTITY;
        for n in links_t.iter().rev() {
            anc_target = anc_target.compose(&link(n)?);
        }
        let out = anc_target.inverse().compose(&anc_source);
        if !out.is_finite() {
            return Err(LookupError::NotFinite);
        }
        Ok((out, time.unwrap_or(0)))
    }

    /// Every frame, sorted by child id, at most `max`.
    pub fn frames(&self, max: usize) -> Vec<FrameInfo> {
        let mut names: Vec<&Box<str>> = self.frames.keys().collect();
        names.sort();
        names
            .into_iter()
            .take(max)
            .filter_map(|n| {
                let f = self.frames.get(n)?;
                let newest = f.samples.back().map_or(0, |s| s.0);
                let oldest = f.samples.front().map_or(0, |s| s.0);
                let rate_hz = if !f.is_static && f.samples.len() > 1 && newest > oldest {
                    (f.samples.len() - 1) as f64 * 1e9 / (newest - oldest) as f64
                } else {
                    0.0
                };
                Some(FrameInfo {
                    child: n.to_string(),
                    parent: f.parent.to_string(),
                    is_static: f.is_static,
                    rate_hz,
                    newest_ns: newest,
                    received: f.received,
                })
            })
            .collect()
    }
}

/// `f`'s pose at `time` (`None`: any time, for all-static chains):
/// the sample at it, or interpolated between the two around it.
fn sample_at(f: &Frame, time: Option<i64>) -> Option<Transform> {
    if f.is_static {
        return f.samples.back().map(|s| s.1);
    }
    let Some(t) = time else {
        return f.samples.back().map(|s| s.1);
    };
    // A chain's common time is usually some link's newest sample (tf2's
    // "time 0"): no search then (see `insert`).
    if let Some(last) = f.samples.back().filter(|s| s.0 == t) {
        return Some(last.1);
    }
    let at = f.samples.partition_point(|s| s.0 < t);
    let after = f.samples.get(at)?;
    if after.0 == t {
        return Some(after.1);
    }
    let before = f.samples.get(at.checked_sub(1)?)?;
    let s = (t - before.0) as f64 / (after.0 - before.0) as f64;
    Some(before.1.interpolate(&after.1, s))
}

#[cfg(test)]
mod tests {
    use super::super::math::{Quat, Vec3};
    use super::*;

    const S: i64 = 1_000_000_000;

    fn tf(x: f64, y: f64, yaw: f64) -> Transform {
        Transform::new(
            Vec3 { x, y, z: 0.0 },
            Quat {
                x: 0.0,
                y: 0.0,
                z: (yaw / 2.0).sin(),
                w: (yaw / 2.0).cos(),
            },
        )
        .unwrap()
    }

    fn near(a: &Transform, x: f64, y: f64) -> bool {
        (a.t.x - x).abs() < 1e-9 && (a.t.y - y).abs() < 1e-9
    }

    #[test]
    fn lookups_interpolate_between_stamps_at_the_latest_common_time() {
        let mut b = TfBuffer::new();
        b.insert("base", "odom", 10 * S, tf(0.0, 0.0, 0.0), false, Some(1))
            .unwrap();
        b.insert("base", "odom", 12 * S, tf(2.0, 0.0, 1.0), false, Some(1))
            .unwrap();
        // A second link known up to 11 s: the chain is looked up at 11 s.
        b.insert("odom", "map", 9 * S, tf(0.0, 0.0, 0.0), false, Some(1))
            .unwrap();
        b.insert("odom", "map", 11 * S, tf(0.0, 0.0, 0.0), false, Some(1))
            .unwrap();
        let (t, at) = b.lookup("map", "base").unwrap();
        assert_eq!(at, 11 * S);
        assert!(near(&t, 1.0, 0.0), "{t:?}");
        assert!(
            (t.r.angle_to(Quat::IDENTITY) - 0.5).abs() < 1e-9,
            "slerp half way"
        );
        // Leading slashes are ignored.
        assert_eq!(b.lookup("/map", "/base").unwrap().0, t);
    }

    #[test]
    fn samples_out_of_order_are_kept_sorted_and_looked_up_at_any_stamp() {
        // The in-order fast paths (append, newest sample) and the searches
        // give the same history: stamps 1..=6 s with x = stamp, in a
        // shuffled order with a repeat.
        let mut b = TfBuffer::new();
        for i in [3, 1, 2, 5, 4, 6, 2] {
            b.insert("base", "odom", i * S, tf(i as f64, 0.0, 0.0), false, None)
                .unwrap();
        }
        assert_eq!(b.bytes(), TF_FRAME_COST + 4 + 4 + 6 * TF_SAMPLE_COST);
        let f = &b.frames["base"];
        let stamps: Vec<i64> = f.samples.iter().map(|s| s.0).collect();
        assert_eq!(stamps, (1..=6).map(|i| i * S).collect::<Vec<_>>());
        for (t, x) in [(6 * S, 6.0), (4 * S + S / 2, 4.5), (S, 1.0), (3 * S, 3.0)] {
            assert!(near(&sample_at(f, Some(t)).unwrap(), x, 0.0), "at {t}");
        }
        assert!(sample_at(f, Some(7 * S)).is_none(), "no extrapolation");
        assert!(sample_at(f, Some(0)).is_none(), "no extrapolation back");
        assert!(near(&b.lookup("odom", "base").unwrap().0, 6.0, 0.0));
    }

    #[test]
    fn lookups_compose_along_the_tree_and_invert_across_it() {
        let mut b = TfBuffer::new();
        let quarter = std::f64::consts::FRAC_PI_2;
        b.insert("odom", "world", 0, tf(1.0, 0.0, quarter), true, Some(1))
            .unwrap();
        b.insert("base", "odom", 5 * S, tf(1.0, 0.0, 0.0), false, Some(2))
            .unwrap();
        b.insert("camera", "odom", 5 * S, tf(0.0, 2.0, 0.0), false, Some(2))
            .unwrap();
        // world <- odom (turned 90 deg) <- base 1 m ahead: base at (1, 1).
        let (t, at) = b.lookup("world", "base").unwrap();
        assert!(near(&t, 1.0, 1.0), "{t:?}");
        assert_eq!(at, 5 * S);
        // Sideways through the common ancestor: base seen from camera.
        let (t, _) = b.lookup("camera", "base").unwrap();
        assert!(near(&t, 1.0, -2.0), "{t:?}");
        // And the inverse.
        let (t, _) = b.lookup("base", "world").unwrap();
        let (w, _) = b.lookup("world", "base").unwrap();
        assert!(t.compose(&w).t.distance(Vec3::ZERO) < 1e-9);
        // Identity for the same frame, even unknown (tf2 does so).
        assert_eq!(
            b.lookup("nowhere", "/nowhere").unwrap().0,
            Transform::IDENTITY
        );
    }

    #[test]
    fn unknown_frames_disconnected_trees_and_loops_are_errors() {
        let mut b = TfBuffer::new();
        b.insert("a", "root1", 0, tf(0.0, 0.0, 0.0), true, None)
            .unwrap();
        b.insert("b", "root2", 0, tf(0.0, 0.0, 0.0), true, None)
            .unwrap();
        assert_eq!(
            b.lookup("a", "ghost"),
            Err(LookupError::UnknownFrame("ghost".into()))
        );
        assert_eq!(b.lookup("a", "b"), Err(LookupError::NoPath));
        b.insert("x", "y", 0, tf(0.0, 0.0, 0.0), true, None)
            .unwrap();
        b.insert("y", "x", 0, tf(0.0, 0.0, 0.0), true, None)
            .unwrap();
        assert_eq!(b.lookup("a", "x"), Err(LookupError::Loop));
        assert!(matches!(
            b.insert("z", "z", 0, Transform::IDENTITY, false, None),
            Err(InsertError::BadFrameId(_))
        ));
        // Finite links whose sum is not: an error, never `inf` in JSON.
        b.insert("far", "a", 0, tf(f64::MAX, 0.0, 0.0), true, None)
            .unwrap();
        b.insert("farther", "far", 0, tf(f64::MAX, 0.0, 0.0), true, None)
            .unwrap();
        assert_eq!(b.lookup("a", "farther"), Err(LookupError::NotFinite));
    }

    #[test]
    fn static_frames_hold_one_sample_for_any_time_until_their_publisher_goes() {
        let mut b = TfBuffer::new();
        b.insert("laser", "base", 0, tf(0.5, 0.0, 0.0), true, Some(7))
            .unwrap();
        b.insert("laser", "base", 0, tf(0.6, 0.0, 0.0), true, Some(7))
            .unwrap();
        b.insert("base", "odom", 100 * S, tf(1.0, 0.0, 0.0), false, Some(8))
            .unwrap();
        let (t, at) = b.lookup("odom", "laser").unwrap();
        assert!(near(&t, 1.6, 0.0), "{t:?}");
        assert_eq!(at, 100 * S, "the static link does not constrain the time");
        assert_eq!(
            b.forget_owner(8),
            0,
            "dynamic frames outlive their publisher, as in tf2"
        );
        assert_eq!(b.forget_owner(7), 1);
        assert!(!b.knows("laser"));
        assert!(b.knows("base"));
    }

    #[test]
    fn history_is_bounded_by_the_cache_time_and_older_samples_are_refused() {
        let mut b = TfBuffer::new();
        for i in 0..=30 {
            b.insert("base", "odom", i * S, tf(i as f64, 0.0, 0.0), false, None)
                .unwrap();
        }
        let f = b.frames(10);
        assert_eq!(f.len(), 1);
        assert!((f[0].rate_hz - 1.0).abs() < 1e-9);
        // 20..=30 kept: 10 s before the newest.
        assert_eq!(b.bytes(), TF_FRAME_COST + 4 + 4 + 11 * TF_SAMPLE_COST);
        assert_eq!(
            b.insert("base", "odom", 5 * S, tf(0.0, 0.0, 0.0), false, None),
            Err(InsertError::TooOld)
        );
        // The same stamp again replaces the sample.
        b.insert("base", "odom", 30 * S, tf(-1.0, 0.0, 0.0), false, None)
            .unwrap();
        assert!(near(&b.lookup("odom", "base").unwrap().0, -1.0, 0.0));
        assert_eq!(b.bytes(), TF_FRAME_COST + 4 + 4 + 11 * TF_SAMPLE_COST);
        // Re-parenting starts the history over.
        b.insert("base", "map", 31 * S, tf(3.0, 0.0, 0.0), false, None)
            .unwrap();
        assert!(!b.knows("odom"));
        assert_eq!(b.bytes(), TF_FRAME_COST + 4 + 3 + TF_SAMPLE_COST);
    }

    #[test]
    fn the_frame_count_is_bounded() {
        let mut b = TfBuffer::new();
        for i in 0..MAX_TF_FRAMES {
            b.insert(&format!("f{i}"), "root", 0, Transform::IDENTITY, true, None)
                .unwrap();
        }
        assert_eq!(
            b.insert("one_more", "root", 0, Transform::IDENTITY, true, None),
            Err(InsertError::Full)
        );
        // Known frames still update.
        b.insert("f1", "root", 1, Transform::IDENTITY, true, None)
            .unwrap();
        assert_eq!(b.refused(), 1);
        assert!(b.bytes() <= MAX_TF_BUFFER_BYTES);
    }
}
