//! rosbridge's `png` compression: a frame's JSON text carried as the pixels
//! of an RGB image, PNG-encoded, base64'd, in `{"op":"png","data":...}`.
//!
//! What it owns: the `png` frame, and the minimal PNG (W3C PNG
//! specification, 2nd edition: signature, IHDR, IDAT, IEND), zlib (RFC
//! 1950), deflate stored blocks (RFC 1951 §3.2.4), CRC-32 (ISO 3309, as the
//! PNG specification's annex D computes it), Adler-32 (RFC 1950 §8) and
//! base64 (RFC 4648 §4, with padding) it needs.
//!
//! It follows rosbridge_library/src/rosbridge_library/internal/
//! pngcompression.py `encode`: the text's bytes, padded with `\n` to fill
//! an RGB image `width = floor(sqrt(len / 3))` pixels wide and
//! `height = ceil(len / 3 / width)` high, 8 bits per channel, saved as PNG
//! and base64-encoded; and rosbridge_library/src/rosbridge_library/
//! capabilities/subscribe.py, which sends it as `{"op": "png", "data":
//! <base64>}` with no `id`, `num` or `total` (a png frame longer than the
//! subscriber's `fragment_size` is then split into `fragment` frames like
//! any other; see [`crate::fragment`]). Here the sizes are computed in
//! integers (`width` the largest `w` with `3w² <= len`, at least 1), which
//! is what the float formula means (and a text shorter than 3 bytes, where
//! Python divides by zero, gets a 1-pixel-wide image).
//!
//! Invariants:
//! - the image's pixel bytes, read row by row, are exactly the text made
//!   ASCII ([`ascii_json`]) followed by `\n` padding; roslibjs reads them
//!   back with a canvas in browsers (src/util/shim/decompressPng.js, which
//!   turns each byte into one UTF-16 unit, so only ASCII survives; hence
//!   the escaping) and with `pngparse` in Node (src/util/decompressPng.js),
//!   then `JSON.parse`s them, the padding being trailing whitespace;
//! - the PNG has no gamma, colour-profile or transparency chunk, so a
//!   browser draws the pixels unchanged, and no alpha channel, so the
//!   canvas's premultiplied alpha cannot alter them;
//! - the deflate stream uses stored (uncompressed) blocks: valid for every
//!   inflater, costs one copy, and compresses nothing (the frame is about
//!   4/3 of the text, base64's expansion); a compressing deflater can
//!   replace [`zlib_stored`] without changing anything else.

use std::borrow::Cow;

/// The PNG file signature.
const SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];

/// IDAT chunks are cut at this size (any cut is valid; streaming decoders
/// read in chunk-sized steps).
const IDAT_SPLIT: usize = 1 << 20;

/// A deflate stored block holds at most this much (RFC 1951 §3.2.4: LEN is
/// 16 bits).
const STORED_BLOCK: usize = 0xffff;

/// Appends the `png` frame of the JSON text `json` to `out`:
/// `{"op":"png","data":"<base64 of the PNG>"}` and a newline, like the
/// frames of [`crate::encode`].
pub fn frame(out: &mut Vec<u8>, json: &str) {
    let png = encode(json);
    out.reserve(22 + png.len().div_ceil(3) * 4);
    out.extend_from_slice(br#"{"op":"png","data":""#);
    crate::base64::encode_into(out, &png);
    out.extend_from_slice(b"\"}\n");
}

/// The PNG image of the JSON text `json` (made ASCII, padded with `\n`).
pub fn encode(json: &str) -> Vec<u8> {
    let text = ascii_json(json);
    let t = text.as_bytes();
    let (w, h) = dimensions(t.len());
    let row = 3 * w;
    // Scanlines: filter type 0 (None), then the row's bytes.
    let mut raw = Vec::with_capacity(h * (row + 1));
    for r in 0..h {
        raw.push(0);
        let lo = (r * row).min(t.len());
        let hi = ((r + 1) * row).min(t.len());
        raw.extend_from_slice(&t[lo..hi]);
        raw.resize(raw.len() + row - (hi - lo), b'\n');
    }
    let z = zlib_stored(&raw);

    let mut png = Vec::with_capacity(z.len() + 64 + 12 * (z.len() / IDAT_SPLIT + 1));
    png.extend_from_slice(&SIGNATURE);
    let mut ihdr = [0u8; 13];
    ihdr[0..4].copy_from_slice(&(w as u32).to_be_bytes());
    ihdr[4..8].copy_from_slice(&(h as u32).to_be_bytes());
    // Bit depth 8, colour type 2 (RGB), deflate, filter method 0, no
    // interlace.
    ihdr[8..13].copy_from_slice(&[8, 2, 0, 0, 0]);
    chunk(&mut png, b"IHDR", &ihdr);
    for piece in z.chunks(IDAT_SPLIT) {
        chunk(&mut png, b"IDAT", piece);
    }
    chunk(&mut png, b"IEND", &[]);
    png
}

/// The image's width and height in pixels for a text of `len` bytes.
pub fn dimensions(len: usize) -> (usize, usize) {
    // The largest w with 3w² <= len: a float guess, then corrected.
    let mut w = ((len as f64) / 3.0).sqrt() as usize;
    while w > 0 && w.saturating_mul(w).saturating_mul(3) > len {
        w -= 1;
    }
    while (w + 1).saturating_mul(w + 1).saturating_mul(3) <= len {
        w += 1;
    }
    let w = w.max(1);
    let h = len.div_ceil(3 * w).max(1);
    (w, h)
}

/// The JSON text with every non-ASCII character written as a `\uXXXX`
/// escape (two, a surrogate pair, past U+FFFF), as Python's `json.dumps`
/// (`ensure_ascii`) writes it. In valid JSON such characters occur only
/// inside strings, where the escape means the same character. Borrowed
/// when the text is ASCII already.
pub fn ascii_json(json: &str) -> Cow<'_, str> {
    if json.is_ascii() {
        return Cow::Borrowed(json);
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(json.len() + json.len() / 2);
    for c in json.chars() {
        if c.is_ascii() {
            out.push(c);
            continue;
        }
        let mut units = [0u16; 2];
        for u in c.encode_utf16(&mut units) {
            out.push_str("\\u");
            for shift in [12, 8, 4, 0] {
                out.push(HEX[usize::from((*u >> shift) & 15)] as char);
            }
        }
    }
    Cow::Owned(out)
}

/// A PNG chunk: length, type, data, CRC-32 of type and data.
fn chunk(png: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    png.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = png.len();
    png.extend_from_slice(kind);
    png.extend_from_slice(data);
    let crc = crc32(&png[start..]);
    png.extend_from_slice(&crc.to_be_bytes());
}

/// A zlib stream (RFC 1950) of `data` in deflate stored blocks.
pub fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let blocks = data.len().div_ceil(STORED_BLOCK).max(1);
    let mut z = Vec::with_capacity(data.len() + 5 * blocks + 6);
    // CMF: deflate, 32 KiB window; FLG: no dictionary, level 0, and the
    // check bits that make 0x7801 a multiple of 31.
    z.extend_from_slice(&[0x78, 0x01]);
    let mut pieces = data.chunks(STORED_BLOCK).peekable();
    if pieces.peek().is_none() {
        // One empty final block.
        z.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(p) = pieces.next() {
        let last = pieces.peek().is_none();
        z.push(u8::from(last)); // BFINAL, BTYPE 00
        let len = p.len() as u16;
        z.extend_from_slice(&len.to_le_bytes());
        z.extend_from_slice(&(!len).to_le_bytes());
        z.extend_from_slice(p);
    }
    z.extend_from_slice(&adler32(data).to_be_bytes());
    z
}

/// CRC-32 (the PNG specification's annex D; zlib's `crc32`).
pub fn crc32(data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut n = 0;
        while n < 256 {
            let mut c = n as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
                k += 1;
            }
            t[n] = c;
            n += 1;
        }
        t
    };
    let mut c = 0xffff_ffffu32;
    for &b in data {
        c = TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    c ^ 0xffff_ffff
}

/// Adler-32 (RFC 1950 §8).
pub fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    // 5552 bytes is the most that cannot overflow u32 before the modulo
    // (zlib's NMAX).
    let (mut a, mut b) = (1u32, 0u32);
    for part in data.chunks(5552) {
        for &x in part {
            a += u32::from(x);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A strict test-only reader: base64 -> PNG chunks (CRCs checked) ->
    /// zlib stored blocks (Adler-32 checked) -> unfiltered pixel bytes.
    fn unbase64(s: &[u8]) -> Vec<u8> {
        let val = |c: u8| -> u32 {
            match c {
                b'A'..=b'Z' => u32::from(c - b'A'),
                b'a'..=b'z' => u32::from(c - b'a') + 26,
                b'0'..=b'9' => u32::from(c - b'0') + 52,
                b'+' => 62,
                b'/' => 63,
                _ => panic!("not base64: {c}"),
            }
        };
        assert_eq!(s.len() % 4, 0);
        let mut out = Vec::new();
        for q in s.chunks(4) {
            let pad = q.iter().filter(|&&c| c == b'=').count();
            let mut n = 0u32;
            for &c in &q[..4 - pad] {
                n = (n << 6) | val(c);
            }
            n <<= 6 * pad as u32;
            let b = n.to_be_bytes();
            out.extend_from_slice(&b[1..4 - pad]);
        }
        out
    }

    fn pixels(png: &[u8]) -> (u32, u32, Vec<u8>) {
        assert_eq!(&png[..8], &SIGNATURE);
        let mut i = 8;
        let (mut w, mut h) = (0, 0);
        let mut z = Vec::new();
        let mut kinds = Vec::new();
        while i < png.len() {
            let len = u32::from_be_bytes(png[i..i + 4].try_into().unwrap()) as usize;
            let kind = &png[i + 4..i + 8];
            let data = &png[i + 8..i + 8 + len];
            let crc = u32::from_be_bytes(png[i + 8 + len..i + 12 + len].try_into().unwrap());
            assert_eq!(crc, crc32(&png[i + 4..i + 8 + len]), "CRC");
            kinds.push(String::from_utf8(kind.to_vec()).unwrap());
            match kind {
                b"IHDR" => {
                    w = u32::from_be_bytes(data[0..4].try_into().unwrap());
                    h = u32::from_be_bytes(data[4..8].try_into().unwrap());
                    assert_eq!(&data[8..], &[8, 2, 0, 0, 0]);
                }
                b"IDAT" => z.extend_from_slice(data),
                _ => {}
            }
            i += 12 + len;
        }
        assert_eq!(kinds.first().map(String::as_str), Some("IHDR"));
        assert_eq!(kinds.last().map(String::as_str), Some("IEND"));
        let raw = inflate_stored(&z);
        let row = 3 * w as usize;
        assert_eq!(raw.len(), h as usize * (row + 1));
        let mut px = Vec::new();
        for r in raw.chunks(row + 1) {
            assert_eq!(r[0], 0, "filter type None");
            px.extend_from_slice(&r[1..]);
        }
        (w, h, px)
    }

    fn inflate_stored(z: &[u8]) -> Vec<u8> {
        assert_eq!((u16::from(z[0]) << 8 | u16::from(z[1])) % 31, 0);
        assert_eq!(z[0] & 15, 8, "deflate");
        let mut i = 2;
        let mut out = Vec::new();
        loop {
            let hdr = z[i];
            assert_eq!(hdr >> 1, 0, "stored block");
            let len = u16::from_le_bytes([z[i + 1], z[i + 2]]);
            let nlen = u16::from_le_bytes([z[i + 3], z[i + 4]]);
            assert_eq!(len, !nlen);
            out.extend_from_slice(&z[i + 5..i + 5 + usize::from(len)]);
            i += 5 + usize::from(len);
            if hdr & 1 == 1 {
                break;
            }
        }
        assert_eq!(z.len(), i + 4);
        assert_eq!(z[i..], adler32(&out).to_be_bytes());
        out
    }

    fn roundtrip(json: &str) {
        let mut out = Vec::new();
        frame(&mut out, json);
        let line = std::str::from_utf8(&out).unwrap();
        let b64 = line
            .strip_prefix(r#"{"op":"png","data":""#)
            .and_then(|s| s.strip_suffix("\"}\n"))
            .unwrap_or_else(|| panic!("frame layout: {line}"));
        let (w, h, px) = pixels(&unbase64(b64.as_bytes()));
        let ascii = ascii_json(json);
        assert_eq!((w as usize, h as usize), dimensions(ascii.len()));
        assert_eq!(&px[..ascii.len()], ascii.as_bytes(), "{json}");
        assert!(px[ascii.len()..].iter().all(|&c| c == b'\n'));
        // Read back as roslibjs does (each byte one character, padding
        // trailing whitespace), the text is the same JSON value.
        let back: String = px.iter().map(|&b| b as char).collect();
        let v: serde_json::Value = serde_json::from_str(&back).unwrap();
        let orig: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(v, orig);
    }

    #[test]
    fn frames_decode_to_the_exact_text() {
        roundtrip(r#"{"op":"publish","topic":"/chatter","msg":{"data":"hello"}}"#);
        roundtrip("{}");
        roundtrip("[1]");
        roundtrip(r#"{"op":"publish","topic":"/t","msg":{"s":"é水🤖\n\"x\""}}"#);
        let big = format!(
            r#"{{"op":"publish","topic":"/big","msg":{{"data":"{}"}}}}"#,
            "0123456789abcdef".repeat(20_000)
        );
        // 320 KB: several stored blocks; a 2 MB one spans IDAT chunks.
        roundtrip(&big);
        let huge = format!(r#"{{"data":"{}"}}"#, "x".repeat(2_200_000));
        roundtrip(&huge);
    }

    /// The sizes pngcompression.py computes (floor(sqrt(len / 3.0)),
    /// ceil(len / 3.0 / width)), for lengths where the floats are exact.
    #[test]
    fn dimensions_follow_rosbridge() {
        for len in 3..5000usize {
            let w = ((len as f64) / 3.0).sqrt().floor() as usize;
            let h = ((len as f64 / 3.0) / w as f64).ceil() as usize;
            assert_eq!(dimensions(len), (w, h), "len {len}");
        }
        assert_eq!(dimensions(0), (1, 1));
        assert_eq!(dimensions(2), (1, 1));
        assert_eq!(dimensions(12), (2, 2));
        assert_eq!(dimensions(13), (2, 3));
    }

    #[test]
    fn checksums_match_their_specs() {
        // The CRC-32 and Adler-32 check values.
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b"IEND"), 0xae42_6082);
        assert_eq!(adler32(b"Wikipedia"), 0x11e6_0398);
        assert_eq!(adler32(&[0xff; 100_000]), {
            let (mut a, mut b) = (1u64, 0u64);
            for _ in 0..100_000 {
                a = (a + 0xff) % 65521;
                b = (b + a) % 65521;
            }
            ((b << 16) | a) as u32
        });
        // An empty zlib stream: header, one empty final block, Adler-32 1.
        assert_eq!(zlib_stored(&[]), [0x78, 1, 1, 0, 0, 0xff, 0xff, 0, 0, 0, 1]);
    }

    #[test]
    fn non_ascii_is_escaped_like_python() {
        assert_eq!(ascii_json(r#"{"a":1}"#), Cow::Borrowed(r#"{"a":1}"#));
        assert_eq!(ascii_json("\"é水🤖\""), r#""\u00e9\u6c34\ud83e\udd16""#);
    }
}
