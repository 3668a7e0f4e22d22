//! The raw CDR adapter: RustDDS hands readers the payload after its
//! 4-byte encapsulation header and takes writers' payloads the same way;
//! the link and the codec (`rosgate_ros2::cdr`) read and write CDR *with*
//! the header (as rmw_zenoh carries it). So a received payload gets its
//! header back (the representation RustDDS read, options zero), and a
//! written one is cut after it. Nothing is decoded here: the loop decodes
//! by the link's types, and `cbor-raw` subscribers get the bytes as they
//! came.

use rustdds::no_key::{Decode, DefaultDecoder, DeserializerAdapter, SerializerAdapter};
use rustdds::RepresentationIdentifier;

/// Nothing goes wrong turning bytes into bytes; RustDDS asks for a type.
#[derive(Debug)]
pub struct Never;

impl std::fmt::Display for Never {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("raw CDR")
    }
}

impl std::error::Error for Never {}

/// The adapter (see the module docs).
pub struct Raw;

#[derive(Clone)]
pub struct RawDecoder;

impl<'de> Decode<'de, Vec<u8>> for RawDecoder {
    type Error = Never;
    fn decode_bytes(self, b: &'de [u8], enc: RepresentationIdentifier) -> Result<Vec<u8>, Never> {
        let mut v = Vec::with_capacity(b.len() + 4);
        v.extend_from_slice(&enc.to_bytes());
        v.extend_from_slice(&[0, 0]);
        v.extend_from_slice(b);
        Ok(v)
    }
}

impl DeserializerAdapter<Vec<u8>> for Raw {
    type Error = Never;
    type Decoded = Vec<u8>;
    fn supported_encodings() -> &'static [RepresentationIdentifier] {
        &[
            RepresentationIdentifier::CDR_LE,
            RepresentationIdentifier::CDR_BE,
        ]
    }
    fn transform_decoded(d: Vec<u8>) -> Vec<u8> {
        d
    }
}

impl DefaultDecoder<Vec<u8>> for Raw {
    type Decoder = RawDecoder;
    const DECODER: RawDecoder = RawDecoder;
}

impl SerializerAdapter<Vec<u8>> for Raw {
    type Error = Never;
    fn output_encoding() -> RepresentationIdentifier {
        RepresentationIdentifier::CDR_LE
    }
    fn to_bytes(v: &Vec<u8>) -> Result<rustdds::bytes::Bytes, Never> {
        // The codec writes little endian with its header: cut it.
        Ok(rustdds::bytes::Bytes::copy_from_slice(
            v.get(4..).unwrap_or_default(),
        ))
    }
}
