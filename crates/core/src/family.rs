//! `family!`: declares an enum whose members are rendered as one labelled
//! counter family (close reasons, error codes, counters, gauges): `ALL`,
//! `COUNT`, a stable `label()` and a `help()` line per member, in
//! declaration order, so adding a member is all it takes to count and
//! render it.

/// Declares a family enum with `ALL`, `COUNT`, `label()` and `help()`, in
/// declaration order (which is also the rendering order).
macro_rules! family {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $($(#[$vmeta:meta])* $variant:ident => $label:literal, $help:literal;)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name { $($(#[$vmeta])* $variant,)* }

        impl $name {
            /// Every member, in rendering order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];
            /// Number of members.
            pub const COUNT: usize = [$($name::$variant,)*].len();

            /// Stable label for counters and logs.
            pub fn label(self) -> &'static str {
                match self { $($name::$variant => $label,)* }
            }

            /// One line of help text (Prometheus `# HELP`).
            pub fn help(self) -> &'static str {
                match self { $($name::$variant => $help,)* }
            }

            /// Slot of this member in its family's array.
            pub fn index(self) -> usize {
                self as usize
            }
        }
    };
}
pub(crate) use family;
