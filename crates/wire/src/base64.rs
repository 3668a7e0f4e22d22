//! Base64 (RFC 4648 §4, standard alphabet, `=` padding), the one encoder
//! of the crate: the WebSocket handshake's accept key, `png` frames, raw
//! CDR carried in JSON lines. A leaf module: it imports nothing of the
//! crate, so any module may use it without a cycle.

/// Appends the base64 (RFC 4648 §4, standard alphabet, `=` padding) of
/// `data`: what Python's `standard_b64encode` writes and JavaScript's
/// `Buffer.from(s, 'base64')` and `data:` URLs read.
pub fn encode_into(out: &mut Vec<u8>, data: &[u8]) {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    out.reserve(data.len().div_ceil(3) * 4);
    let mut it = data.chunks_exact(3);
    for c in &mut it {
        let n = (u32::from(c[0]) << 16) | (u32::from(c[1]) << 8) | u32::from(c[2]);
        out.extend_from_slice(&[
            A[(n >> 18) as usize & 63],
            A[(n >> 12) as usize & 63],
            A[(n >> 6) as usize & 63],
            A[n as usize & 63],
        ]);
    }
    match *it.remainder() {
        [x] => {
            let n = u32::from(x) << 16;
            out.extend_from_slice(&[
                A[(n >> 18) as usize & 63],
                A[(n >> 12) as usize & 63],
                b'=',
                b'=',
            ]);
        }
        [x, y] => {
            let n = (u32::from(x) << 16) | (u32::from(y) << 8);
            out.extend_from_slice(&[
                A[(n >> 18) as usize & 63],
                A[(n >> 12) as usize & 63],
                A[(n >> 6) as usize & 63],
                b'=',
            ]);
        }
        _ => {}
    }
}

/// The base64 of `data` as a `String`.
pub fn encode(data: &[u8]) -> String {
    let mut out = Vec::new();
    encode_into(&mut out, data);
    // Only alphabet bytes and `=` are written.
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::encode;

    #[test]
    fn rfc_4648_section_10_vectors() {
        for (raw, b64) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(encode(raw.as_bytes()), b64);
        }
    }
}
