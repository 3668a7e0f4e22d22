//! Rigid transforms as tf2 stores them: a translation and a unit
//! quaternion (`geometry_msgs/Transform`). `a.compose(b)` applies `b`
//! first, then `a` (tf2's `a * b`); interpolation is linear for the
//! translation and spherical (slerp, the shortest arc) for the rotation,
//! as tf2's `TimeCache::interpolate` does.
//!
//! Invariants: every `Transform` built by [`Transform::new`] has finite
//! components and a unit quaternion; the operations keep it so.

/// A translation or a point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Vec3 {
    pub x: f64,
    pub y: f64,
    pub z: f64,
}

/// A rotation (unit quaternion, `w` the scalar part).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quat {
    pub x: f64,
    pub y: f64,
    pub z: f64,
    pub w: f64,
}

/// A child frame's pose in its parent frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transform {
    pub t: Vec3,
    pub r: Quat,
}

impl Vec3 {
    pub const ZERO: Vec3 = Vec3 {
        x: 0.0,
        y: 0.0,
        z: 0.0,
    };

    fn add(self, o: Vec3) -> Vec3 {
        Vec3 {
            x: self.x + o.x,
            y: self.y + o.y,
            z: self.z + o.z,
        }
    }

    fn scale(self, s: f64) -> Vec3 {
        Vec3 {
            x: self.x * s,
            y: self.y * s,
            z: self.z * s,
        }
    }

    /// Euclidean distance to `o`.
    pub fn distance(self, o: Vec3) -> f64 {
        let (dx, dy, dz) = (self.x - o.x, self.y - o.y, self.z - o.z);
        (dx * dx + dy * dy + dz * dz).sqrt()
    }

    fn finite(self) -> bool {
        self.x.is_finite() && self.y.is_finite() && self.z.is_finite()
    }
}

impl Quat {
    pub const IDENTITY: Quat = Quat {
        x: 0.0,
        y: 0.0,
        z: 0.0,
        w: 1.0,
    };

    fn dot(self, o: Quat) -> f64 {
        self.x * o.x + self.y * o.y + self.z * o.z + self.w * o.w
    }

    /// This quaternion scaled to length 1; `None` when it has no
    /// direction (zero or not finite).
    pub fn normalized(self) -> Option<Quat> {
        let n = self.dot(self).sqrt();
        if !n.is_finite() || n < 1e-9 {
            return None;
        }
        Some(Quat {
            x: self.x / n,
            y: self.y / n,
            z: self.z / n,
            w: self.w / n,
        })
    }

    fn mul(self, o: Quat) -> Quat {
        Quat {
            w: self.w * o.w - self.x * o.x - self.y * o.y - self.z * o.z,
            x: self.w * o.x + self.x * o.w + self.y * o.z - self.z * o.y,
            y: self.w * o.y - self.x * o.z + self.y * o.w + self.z * o.x,
            z: self.w * o.z + self.x * o.y - self.y * o.x + self.z * o.w,
        }
    }

    fn conjugate(self) -> Quat {
        Quat {
            x: -self.x,
            y: -self.y,
            z: -self.z,
            w: self.w,
        }
    }

    /// `v` rotated by this (unit) quaternion.
    pub fn rotate(self, v: Vec3) -> Vec3 {
        let p = Quat {
            x: v.x,
            y: v.y,
            z: v.z,
            w: 0.0,
        };
        let r = self.mul(p).mul(self.conjugate());
        Vec3 {
            x: r.x,
            y: r.y,
            z: r.z,
        }
    }

    /// The angle (radians, 0..=pi) of the rotation taking `self` to `o`:
    /// `q` and `-q` are the same rotation, so the sign does not count.
    pub fn angle_to(self, o: Quat) -> f64 {
        2.0 * self.dot(o).abs().min(1.0).acos()
    }

    /// Spherical interpolation from `self` (`s` = 0) to `o` (`s` = 1)
    /// along the shorter arc.
    pub fn slerp(self, o: Quat, s: f64) -> Quat {
        let mut d = self.dot(o);
        let mut o = o;
        if d < 0.0 {
            d = -d;
            o = Quat {
                x: -o.x,
                y: -o.y,
                z: -o.z,
                w: -o.w,
            };
        }
        let (a, b) = if d > 0.9995 {
            // Nearly the same rotation: linear, then normalized below.
            (1.0 - s, s)
        } else {
            let theta = d.acos();
            let sin = theta.sin();
            (((1.0 - s) * theta).sin() / sin, (s * theta).sin() / sin)
        };
        let q = Quat {
            x: a * self.x + b * o.x,
            y: a * self.y + b * o.y,
            z: a * self.z + b * o.z,
            w: a * self.w + b * o.w,
        };
        q.normalized().unwrap_or(self)
    }
}

impl Transform {
    pub const IDENTITY: Transform = Transform {
        t: Vec3::ZERO,
        r: Quat::IDENTITY,
    };

    /// A transform from message fields: `None` when a component is not
    /// finite or the quaternion has no direction; the quaternion is
    /// normalized (tf2 does the same on insertion).
    pub fn new(t: Vec3, r: Quat) -> Option<Transform> {
        if !t.finite() {
            return None;
        }
        Some(Transform {
            t,
            r: r.normalized()?,
        })
    }

    /// Whether every component is finite (composition of finite
    /// transforms can overflow).
    pub fn is_finite(&self) -> bool {
        self.t.finite()
            && self.r.x.is_finite()
            && self.r.y.is_finite()
            && self.r.z.is_finite()
            && self.r.w.is_finite()
    }

    /// `self * o`: `o` applied first, then `self` (a chain parent <-
    /// child <- grandchild composes as `parent_child.compose(child_grand)`).
    pub fn compose(&self, o: &Transform) -> Transform {
        Transform {
            t: self.t.add(self.r.rotate(o.t)),
            r: self.r.mul(o.r).normalized().unwrap_or(Quat::IDENTITY),
        }
    }

    /// The inverse transform.
    pub fn inverse(&self) -> Transform {
        let r = self.r.conjugate();
        Transform {
            t: r.rotate(self.t).scale(-1.0),
            r,
        }
    }

    /// The transform `s` of the way from `self` (0) to `o` (1).
    pub fn interpolate(&self, o: &Transform, s: f64) -> Transform {
        Transform {
            t: self.t.scale(1.0 - s).add(o.t.scale(s)),
            r: self.r.slerp(o.r, s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    fn yaw(rad: f64) -> Quat {
        Quat {
            x: 0.0,
            y: 0.0,
            z: (rad / 2.0).sin(),
            w: (rad / 2.0).cos(),
        }
    }

    #[test]
    fn composition_rotates_then_translates() {
        let a = Transform::new(
            Vec3 {
                x: 1.0,
                y: 0.0,
                z: 0.0,
            },
            yaw(std::f64::consts::FRAC_PI_2),
        )
        .unwrap();
        let b = Transform::new(
            Vec3 {
                x: 1.0,
                y: 0.0,
                z: 0.0,
            },
            Quat::IDENTITY,
        )
        .unwrap();
        let c = a.compose(&b);
        assert!(
            close(c.t.x, 1.0) && close(c.t.y, 1.0) && close(c.t.z, 0.0),
            "{c:?}"
        );
        let back = c.compose(&c.inverse());
        assert!(back.t.distance(Vec3::ZERO) < 1e-9);
        assert!(back.r.angle_to(Quat::IDENTITY) < 1e-6);
    }

    #[test]
    fn slerp_takes_the_shorter_arc_at_constant_speed() {
        let a = yaw(0.0);
        let b = yaw(1.0);
        let m = a.slerp(b, 0.25);
        assert!(close(m.angle_to(a), 0.25), "{}", m.angle_to(a));
        // -b is the same rotation: still 0.25 rad from a, not the long way.
        let nb = Quat {
            x: -b.x,
            y: -b.y,
            z: -b.z,
            w: -b.w,
        };
        assert!(close(a.slerp(nb, 0.25).angle_to(a), 0.25));
    }

    #[test]
    fn bad_quaternions_and_numbers_are_refused() {
        let zero = Quat {
            x: 0.0,
            y: 0.0,
            z: 0.0,
            w: 0.0,
        };
        assert!(Transform::new(Vec3::ZERO, zero).is_none());
        let nan = Vec3 {
            x: f64::NAN,
            y: 0.0,
            z: 0.0,
        };
        assert!(Transform::new(nan, Quat::IDENTITY).is_none());
        let scaled = Quat {
            x: 0.0,
            y: 0.0,
            z: 0.0,
            w: 2.0,
        };
        assert_eq!(
            Transform::new(Vec3::ZERO, scaled).unwrap().r,
            Quat::IDENTITY
        );
    }
}
