//! JSON in rosbridge's shape -> CBOR by ROS 2 type: the `msg` of the
//! `cbor` compression as rosbridge encodes it when it knows the message's
//! type (rosbridge_library/src/rosbridge_library/internal/
//! cbor_conversion.py `extract_cbor_values`, which walks the message's
//! slots).
//!
//! What it owns: the mapping of each field type to a CBOR item, by the
//! type model (`crate::model`), with the primitives of
//! `rosgate_wire::cbor`:
//! - a struct is a map with the type's fields as text keys in declaration
//!   order (rosidl's `structure_needs_at_least_one_member` filler is left
//!   out, as in the JSON);
//! - `bool` is `true`/`false`; integer types (`byte`, `char`, `int8` ..
//!   `uint64`) are CBOR integers; `float32` and `float64` are doubles, a
//!   `float32` first narrowed to its float32 value (rosbridge reads it from
//!   the message as a Python `float` of the float32); NaN and the
//!   infinities are the doubles (the JSON's `null`, `"NaN"`,
//!   `"Infinity"`, `"-Infinity"`, as `crate::cdr` reads them);
//! - `string`/`wstring` are text strings;
//! - `uint8` and `char` arrays (fixed, bounded or not) are one byte string
//!   (`BYTESTREAM_TYPES`), from a base64 string or a list of numbers;
//! - arrays of the other numeric types but `byte` are RFC 8746 typed arrays,
//!   little-endian, with the tags of `rosgate_wire::cbor`
//!   (`TAGGED_ARRAY_FORMATS`); `byte[]`, `bool[]`, `string[]` and struct
//!   arrays are CBOR arrays of their elements;
//! - a field missing from the JSON takes its definition's default or the
//!   type's zero value, as rosbridge fills a message before publishing it.
//!
//! Invariants:
//! - nothing panics and nothing recurses deeper than
//!   [`crate::cdr::MAX_DEPTH`] structs;
//! - a message that does not fit its type (a wrong kind, a value out of
//!   range, a key the type lacks, a wrong fixed length, bad base64) is an
//!   error naming the field, and on error `out` is as it was: the caller
//!   falls back to the type-unaware mapping (`rosgate_wire::cbor::from_json`).

use serde_json::Value;

use rosgate_wire::cbor;

use crate::cdr::{
    check_count, err, f32_of, float_of, int_in, is_empty_member, json_kind, lookup, prim_name,
    str_of, CdrError, CdrErrorKind, Elem, Lookup, Res, Types, B64_IN, MAX_DEPTH,
};
use crate::model::{Field, MsgDef, Prim, Shape};
use base64::Engine as _;

/// Appends `msg` (a JSON object in rosbridge's shape) of type `ty` as CBOR
/// to `out` (see the module docs); on error `out` is unchanged.
pub fn encode<T: Types + ?Sized>(
    types: &T,
    ty: &str,
    msg: &Value,
    out: &mut Vec<u8>,
) -> Result<(), CdrError> {
    let start = out.len();
    let def = lookup(types, ty)?;
    let mut w = Walker {
        types: Lookup::new(types),
        out,
    };
    let r = match msg {
        Value::Object(_) => w.structure(def, Some(msg), 1),
        other => err(CdrErrorKind::NotAnObject {
            ty: def.name.clone(),
            got: json_kind(other),
        }),
    };
    if r.is_err() {
        out.truncate(start);
    }
    r
}

/// Appends the `cbor` compression's publish frame,
/// `{"op":"publish","topic":<topic>,"msg":<msg by type>}`, as
/// `rosgate_wire::cbor::publish` lays it out; on error `out` is unchanged.
pub fn publish<T: Types + ?Sized>(
    types: &T,
    ty: &str,
    topic: &str,
    msg: &Value,
    out: &mut Vec<u8>,
) -> Result<(), CdrError> {
    let start = out.len();
    cbor::map(out, 3);
    cbor::text(out, "op");
    cbor::text(out, "publish");
    cbor::text(out, "topic");
    cbor::text(out, topic);
    cbor::text(out, "msg");
    encode(types, ty, msg, out).inspect_err(|_| out.truncate(start))
}

struct Walker<'t, 'o, T: ?Sized> {
    types: Lookup<'t, T>,
    out: &'o mut Vec<u8>,
}

impl<'t, T: Types + ?Sized> Walker<'t, '_, T> {
    /// `v` is `None` when the whole struct is missing from the JSON.
    fn structure(&mut self, def: &'t MsgDef, v: Option<&Value>, depth: usize) -> Res {
        if depth > MAX_DEPTH {
            return err(CdrErrorKind::TooDeep);
        }
        let obj = match v {
            None => None,
            Some(Value::Object(o)) => Some(o),
            Some(other) => {
                return err(CdrErrorKind::NotAnObject {
                    ty: def.name.clone(),
                    got: json_kind(other),
                })
            }
        };
        let fields: Vec<&'t Field> = def.fields.iter().filter(|f| !is_empty_member(f)).collect();
        cbor::map(self.out, fields.len());
        let mut matched = 0;
        for f in fields {
            cbor::text(self.out, &f.name);
            let r = match obj.and_then(|o| o.get(&f.name)) {
                Some(x) => {
                    matched += 1;
                    self.field(f, Some(x), depth)
                }
                None => self.field(f, f.default.as_ref(), depth),
            };
            r.map_err(|e| e.in_field(&f.name))?;
        }
        crate::cdr::unknown_field(def, obj, matched)
    }

    /// A field's value, or (`None`) its zero value.
    fn field(&mut self, f: &'t Field, v: Option<&Value>, depth: usize) -> Res {
        let elem = self.types.elem(&f.base)?;
        match f.shape {
            Shape::Single => self.elem(elem, v, depth),
            shape => self.array(elem, shape, v, depth),
        }
    }

    fn elem(&mut self, elem: Elem<'t>, v: Option<&Value>, depth: usize) -> Res {
        match elem {
            Elem::Prim(p) => self.prim(p, v),
            Elem::Struct(def) => self.structure(def, v, depth + 1),
        }
    }

    fn array(&mut self, elem: Elem<'t>, shape: Shape, v: Option<&Value>, depth: usize) -> Res {
        let items: &[Value] = match v {
            None => &[],
            Some(Value::Array(items)) => items,
            Some(Value::String(s)) if matches!(elem, Elem::Prim(Prim::UInt8 | Prim::Char)) => {
                let bytes = B64_IN
                    .decode(s)
                    .map_err(|_| CdrError::new(CdrErrorKind::BadBase64))?;
                check_count(shape, bytes.len())?;
                cbor::bytes(self.out, &bytes);
                return Ok(());
            }
            Some(other) => {
                return err(CdrErrorKind::WrongType {
                    expected: "array",
                    got: json_kind(other),
                })
            }
        };
        // A missing fixed array is its length of zero values.
        let zeros = match (v, shape) {
            (None, Shape::Array(n)) => n as usize,
            _ => {
                check_count(shape, items.len())?;
                0
            }
        };
        let n = items.len().max(zeros);
        let p = match elem {
            Elem::Prim(p) => p,
            Elem::Struct(_) => {
                cbor::array(self.out, n);
                for i in 0..n {
                    self.elem(elem, items.get(i), depth)
                        .map_err(|e| e.at_index(i))?;
                }
                return Ok(());
            }
        };
        match p {
            Prim::UInt8 | Prim::Char => {
                let b = collect(items, zeros, |x| int_in::<u8>(x, p))?;
                cbor::bytes(self.out, &b);
            }
            Prim::Int8 => typed(self.out, items, zeros, |x| int_in::<i8>(x, p))?,
            Prim::UInt16 => typed(self.out, items, zeros, |x| int_in::<u16>(x, p))?,
            Prim::Int16 => typed(self.out, items, zeros, |x| int_in::<i16>(x, p))?,
            Prim::UInt32 => typed(self.out, items, zeros, |x| int_in::<u32>(x, p))?,
            Prim::Int32 => typed(self.out, items, zeros, |x| int_in::<i32>(x, p))?,
            Prim::UInt64 => typed(self.out, items, zeros, |x| int_in::<u64>(x, p))?,
            Prim::Int64 => typed(self.out, items, zeros, |x| int_in::<i64>(x, p))?,
            Prim::Float32 => typed(self.out, items, zeros, f32_of)?,
            Prim::Float64 => typed(self.out, items, zeros, |x| float_of(x, p))?,
            Prim::Bool | Prim::Byte | Prim::String(_) | Prim::WString(_) => {
                cbor::array(self.out, n);
                for i in 0..n {
                    self.prim(p, items.get(i)).map_err(|e| e.at_index(i))?;
                }
            }
        }
        Ok(())
    }

    /// A primitive, or (`None`) its zero value.
    fn prim(&mut self, p: Prim, v: Option<&Value>) -> Res {
        let Some(v) = v else {
            match p {
                Prim::Bool => cbor::bool(self.out, false),
                Prim::Float32 | Prim::Float64 => cbor::f64(self.out, 0.0),
                Prim::String(_) | Prim::WString(_) => cbor::text(self.out, ""),
                _ => cbor::uint(self.out, 0),
            }
            return Ok(());
        };
        match p {
            Prim::Bool => {
                let b = match v {
                    Value::Bool(b) => *b,
                    Value::Number(_) => match int_in::<u8>(v, p)? {
                        0 => false,
                        1 => true,
                        _ => return err(CdrErrorKind::OutOfRange { ty: "bool" }),
                    },
                    other => {
                        return err(CdrErrorKind::WrongType {
                            expected: prim_name(p),
                            got: json_kind(other),
                        })
                    }
                };
                cbor::bool(self.out, b);
            }
            Prim::Byte | Prim::Char | Prim::UInt8 => {
                cbor::uint(self.out, int_in::<u8>(v, p)?.into())
            }
            Prim::UInt16 => cbor::uint(self.out, int_in::<u16>(v, p)?.into()),
            Prim::UInt32 => cbor::uint(self.out, int_in::<u32>(v, p)?.into()),
            Prim::UInt64 => cbor::uint(self.out, int_in::<u64>(v, p)?),
            Prim::Int8 => cbor::int(self.out, int_in::<i8>(v, p)?.into()),
            Prim::Int16 => cbor::int(self.out, int_in::<i16>(v, p)?.into()),
            Prim::Int32 => cbor::int(self.out, int_in::<i32>(v, p)?.into()),
            Prim::Int64 => cbor::int(self.out, int_in::<i64>(v, p)?),
            Prim::Float32 => cbor::f64(self.out, f32_of(v)?.into()),
            Prim::Float64 => cbor::f64(self.out, float_of(v, p)?),
            Prim::String(_) | Prim::WString(_) => cbor::text(self.out, str_of(v, p)?),
        }
        Ok(())
    }
}

/// `items` converted by `conv` (or `zeros` zero values when there are
/// none), each error naming its index.
fn collect<X: Default + Clone>(
    items: &[Value],
    zeros: usize,
    conv: impl Fn(&Value) -> Res<X>,
) -> Res<Vec<X>> {
    if items.is_empty() {
        return Ok(vec![X::default(); zeros]);
    }
    items
        .iter()
        .enumerate()
        .map(|(i, x)| conv(x).map_err(|e| e.at_index(i)))
        .collect()
}

/// A typed array of `items` converted by `conv`.
fn typed<X: cbor::TypedElem + Default>(
    out: &mut Vec<u8>,
    items: &[Value],
    zeros: usize,
    conv: impl Fn(&Value) -> Res<X>,
) -> Res {
    let xs = collect(items, zeros, conv)?;
    cbor::typed_array(out, &xs);
    Ok(())
}

#[cfg(test)]
mod tests;
