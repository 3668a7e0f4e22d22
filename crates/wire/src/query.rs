//! The query string of a request target (`/path?a=1&b=x%3Ay`), as a list
//! of percent-decoded `(key, value)` pairs, in order. roslibjs and
//! roslibpy cannot send a first message before they subscribe, so what a
//! WebSocket client declares about itself (its domain, its node) travels
//! in the URL it connects to.
//!
//! Invariants:
//! - never panics; a malformed escape (`%zz`, a lone `%`) is kept literally,
//!   as browsers do, and invalid UTF-8 after decoding is replaced (U+FFFD),
//!   so the caller's validation refuses it with a readable message;
//! - `+` means a space (HTML forms), `%2B` a plus;
//! - at most [`MAX_PARAMS`] pairs are returned; the caller refuses more.

/// Pairs kept from one query string.
pub const MAX_PARAMS: usize = 64;

/// The path of a request target, without its query or fragment.
pub fn path(target: &str) -> &str {
    let end = target.find(['?', '#']).unwrap_or(target.len());
    &target[..end]
}

/// The decoded `(key, value)` pairs of `target`'s query, in order, at most
/// `MAX_PARAMS + 1` of them (so the caller can tell "too many"). A pair
/// without `=` has an empty value.
pub fn params(target: &str) -> Vec<(String, String)> {
    let Some(start) = target.find('?') else {
        return Vec::new();
    };
    let query = &target[start + 1..];
    let query = &query[..query.find('#').unwrap_or(query.len())];
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .take(MAX_PARAMS + 1)
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// Percent-decodes one component.
pub fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => match (hex(b.get(i + 1)), hex(b.get(i + 2))) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(c: Option<&u8>) -> Option<u8> {
    match c? {
        c @ b'0'..=b'9' => Some(c - b'0'),
        c @ b'a'..=b'f' => Some(c - b'a' + 10),
        c @ b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_in_order_decoded() {
        assert_eq!(
            params("/?domain=3&node=viewer&remap=a%3A%3D%2Fb&remap=c:=d&flag"),
            vec![
                ("domain".into(), "3".into()),
                ("node".into(), "viewer".into()),
                ("remap".into(), "a:=/b".into()),
                ("remap".into(), "c:=d".into()),
                ("flag".into(), String::new()),
            ]
        );
        assert!(params("/").is_empty());
        assert!(params("/?").is_empty());
        assert_eq!(params("/x?a=1#frag"), vec![("a".into(), "1".into())]);
        assert_eq!(path("/domain/3?x=1"), "/domain/3");
        assert_eq!(path("/"), "/");
    }

    #[test]
    fn malformed_escapes_are_kept_and_never_panic() {
        assert_eq!(decode("a%zzb"), "a%zzb");
        assert_eq!(decode("%"), "%");
        assert_eq!(decode("%4"), "%4");
        assert_eq!(decode("a+b%2B"), "a b+");
        assert_eq!(decode("%ff"), "\u{fffd}");
        assert_eq!(decode("%41"), "A");
        for s in ["%", "%%", "%%%", "%4%", "%a", "a%", "+%+"] {
            let _ = decode(s);
        }
        assert_eq!(
            params(&format!("/?{}", "&a=1".repeat(1000))).len(),
            MAX_PARAMS + 1
        );
    }
}
