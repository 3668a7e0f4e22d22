//! The type model shared by the parser, the hasher and the CDR codec.
//!
//! A [`MsgDef`] is one struct type under its full name (`pkg/msg/Name`,
//! `pkg/srv/Name_Request`, `pkg/action/Name_Goal`, ...). Services and
//! actions are sets of such structs ([`SrvDef`], [`ActionDef`]); the
//! registry keeps every struct, including the synthesized ones (a
//! service's `_Event`, an action's `_SendGoal_Request`, ...), by full name.

use serde_json::Value;

/// A primitive (non-nested) field type. String bounds are `Some(n)` for
/// `string<=n` / `wstring<=n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prim {
    Bool,
    /// `.msg` `byte` (IDL octet).
    Byte,
    /// `.msg` `char`: an unsigned 8-bit integer (rosidl maps it to uint8).
    Char,
    Int8,
    UInt8,
    Int16,
    UInt16,
    Int32,
    UInt32,
    Int64,
    UInt64,
    Float32,
    Float64,
    String(Option<u32>),
    WString(Option<u32>),
}

/// What one element of a field is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Base {
    Prim(Prim),
    /// Another struct, by full name (`geometry_msgs/msg/Vector3`): the
    /// parser resolves bare and `pkg/Name` references.
    Nested(String),
}

/// How many elements a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One element.
    Single,
    /// `T[n]`: exactly n.
    Array(u32),
    /// `T[<=n]`: up to n.
    Bounded(u32),
    /// `T[]`: any number.
    Sequence,
}

/// One data member, in declaration order.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub base: Base,
    pub shape: Shape,
    /// The definition's default value (`int32 x 5`, `int32[] y [1, 2]`),
    /// as JSON of the field's shape; `None` means the type's zero value.
    pub default: Option<Value>,
}

/// A constant (`int32 FOO=1`): not a data member, not on the wire, not in
/// the hash.
#[derive(Debug, Clone, PartialEq)]
pub struct Constant {
    pub name: String,
    pub prim: Prim,
    pub value: Value,
}

/// One struct type.
#[derive(Debug, Clone, PartialEq)]
pub struct MsgDef {
    /// Full name: `pkg/msg/Name`, `pkg/srv/Name_Request`, ...
    pub name: String,
    /// Data members in declaration order. Never empty: an empty definition
    /// gets rosidl's `uint8 structure_needs_at_least_one_member`.
    pub fields: Vec<Field>,
    pub constants: Vec<Constant>,
}

/// The member rosidl adds to a struct with no data members.
pub const EMPTY_STRUCT_MEMBER: &str = "structure_needs_at_least_one_member";

/// A service: `pkg/srv/Name` with its `_Request`, `_Response` and `_Event`
/// structs (by full name, all in the registry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrvDef {
    pub name: String,
    pub request: String,
    pub response: String,
    pub event: String,
}

/// An action: `pkg/action/Name` with its `_Goal`, `_Result`, `_Feedback`,
/// `_FeedbackMessage` structs and `_SendGoal`, `_GetResult` services.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionDef {
    pub name: String,
    pub goal: String,
    pub result: String,
    pub feedback: String,
    pub feedback_message: String,
    pub send_goal: String,
    pub get_result: String,
}

/// Which kind of interface a definition file holds: its directory under
/// `share/<pkg>/` and its file extension are both this name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Msg,
    Srv,
    Action,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Msg, Kind::Srv, Kind::Action];

    /// `msg`, `srv` or `action`: the directory, the file extension and the
    /// middle part of a full type name.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Msg => "msg",
            Kind::Srv => "srv",
            Kind::Action => "action",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}
