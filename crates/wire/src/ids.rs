//! The ids the gateway gives the requests it forwards to providers.
//!
//! A forwarded call carries `"rg-<seq>"`, where `seq` is a process-wide
//! sequence number issued once (the core's call table owns the counter).
//! The provider must answer with exactly that string; [`parse_call_id`]
//! accepts exactly the spelling [`push_call_id`] writes, so one call has one
//! spelling and nothing else (a number, a padded or signed variant) can match.

/// Prefix of the ids we give forwarded calls.
pub const CALL_ID_PREFIX: &str = "rg-";

/// Appends `"rg-<seq>"` (with its quotes) to `out`.
pub fn push_call_id(out: &mut Vec<u8>, seq: u64) {
    out.push(b'"');
    out.extend_from_slice(CALL_ID_PREFIX.as_bytes());
    push_u64(out, seq);
    out.push(b'"');
}

/// Parses a provider's response id (raw JSON) back into our sequence number.
/// Anything that is not exactly a string `"rg-<digits>"` is `None`.
pub fn parse_call_id(raw: &[u8]) -> Option<u64> {
    let inner = raw.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    let digits = inner.strip_prefix(CALL_ID_PREFIX.as_bytes())?;
    // Exactly the digits we wrote: no sign, no leading zero, so one call
    // has exactly one spelling.
    if digits.is_empty()
        || digits.len() > 20
        || (digits.len() > 1 && digits[0] == b'0')
        || !digits.iter().all(u8::is_ascii_digit)
    {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Appends the decimal digits of `n`.
pub fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_strictly() {
        assert_eq!(parse_call_id(br#""rg-42""#), Some(42));
        for bad in [
            &br#"rg-42"#[..],
            br#""rg-""#,
            br#""rg-4x""#,
            br#""rg-+1""#,
            b"42",
            br#""RG-1""#,
            br#""rg-99999999999999999999""#,
            br#""rg-042""#,
        ] {
            assert_eq!(parse_call_id(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn written_ids_parse_back() {
        for n in [0u64, 1, 42, u64::MAX] {
            let mut out = Vec::new();
            push_call_id(&mut out, n);
            assert_eq!(parse_call_id(&out), Some(n));
        }
    }

    #[test]
    fn digits() {
        for n in [0u64, 9, 10, 12345, u64::MAX] {
            let mut out = Vec::new();
            push_u64(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
        }
    }
}
