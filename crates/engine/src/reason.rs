//! Failure reasons: failures grouped by their message with what varies masked, so a report can
//! say "24 × FATAL: sorry, too many clients already" instead of 24 slightly different lines.
//!
//! `normalize` masks addresses (`<addr>`), long hex ids and UUIDs (`<id>`) and numbers (`<n>`)
//! after the message's fixed prefix; `Reasons` counts failures per (class, normalised message),
//! keeping the first message of each as its sample. It holds at most `MAX_REASONS` groups; later
//! distinct messages count in one `OTHER` group per class, so memory stays bounded and a failing
//! operation allocates nothing once its group exists.

use crate::class::ErrorClass;

/// Distinct (class, message) groups kept per group result.
pub const MAX_REASONS: usize = 32;
/// The key of the group that collects messages beyond `MAX_REASONS`.
pub const OTHER: &str = "(other messages)";
/// Longest key and sample kept, in bytes.
const MAX_TEXT: usize = 240;

/// Failures of one class with one normalised message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reason {
    pub class: ErrorClass,
    /// The normalised message (the grouping key).
    pub key: String,
    /// The first message of the group, as the client said it.
    pub sample: String,
    pub count: u64,
}

/// Mask what varies between otherwise equal messages: `text[..fixed]` is kept verbatim, the rest
/// has IPv4 and bracketed IPv6 addresses (with their ports), hex ids of 8+ characters and UUIDs,
/// and numbers masked; whitespace runs become one space. Written into `out` (cleared first).
pub fn normalize(text: &str, fixed: usize, out: &mut String) {
    out.clear();
    let fixed = floor_char(text, fixed.min(text.len()));
    out.push_str(&text[..fixed]);
    let b = text.as_bytes();
    let mut i = fixed;
    let mut space = false;
    while i < b.len() && out.len() < MAX_TEXT {
        let c = b[i];
        if c.is_ascii_whitespace() {
            space = true;
            i += 1;
            continue;
        }
        if space {
            if !out.is_empty() {
                out.push(' ');
            }
            space = false;
        }
        let boundary = i == 0 || !b[i - 1].is_ascii_alphanumeric();
        if c == b'[' {
            if let Some(end) = ipv6(b, i) {
                out.push_str("<addr>");
                i = end;
                continue;
            }
        }
        if boundary && c.is_ascii_hexdigit() {
            if let Some(end) = ipv4(b, i).filter(|_| i == 0 || b[i - 1] != b'.') {
                out.push_str("<addr>");
                i = end;
                continue;
            }
            if let Some(end) = hex_id(b, i) {
                out.push_str("<id>");
                i = end;
                continue;
            }
        }
        if c.is_ascii_digit() {
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            out.push_str("<n>");
            continue;
        }
        let ch = text[i..].chars().next().expect("i is on a char boundary");
        out.push(ch);
        i += ch.len_utf8();
    }
    truncate(out, MAX_TEXT);
}

/// `a.b.c.d` (each 1–3 digits) with an optional `:port`; returns the end.
fn ipv4(b: &[u8], start: usize) -> Option<usize> {
    let mut i = start;
    for part in 0..4 {
        let s = i;
        while i < b.len() && b[i].is_ascii_digit() && i - s < 3 {
            i += 1;
        }
        if i == s {
            return None;
        }
        if part < 3 {
            if b.get(i) != Some(&b'.') {
                return None;
            }
            i += 1;
        }
    }
    if b.get(i).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    Some(port(b, i))
}

/// `[hex:…]` with an optional `:port`.
fn ipv6(b: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < b.len() && (b[i].is_ascii_hexdigit() || b[i] == b':' || b[i] == b'.') {
        i += 1;
    }
    (b.get(i) == Some(&b']') && b[start + 1..i].contains(&b':')).then(|| port(b, i + 1))
}

fn port(b: &[u8], i: usize) -> usize {
    if b.get(i) == Some(&b':') && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
        let mut j = i + 1;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        return j;
    }
    i
}

/// A run of 8+ hex digits (UUID dashes allowed) with at least one digit and one letter, ending at
/// a word boundary: a request id, a hash, a UUID.
fn hex_id(b: &[u8], start: usize) -> Option<usize> {
    let mut i = start;
    let (mut digits, mut letters, mut n) = (0, 0, 0);
    while i < b.len() && (b[i].is_ascii_hexdigit() || (b[i] == b'-' && n > 0)) {
        if b[i].is_ascii_digit() {
            digits += 1;
        } else if b[i] != b'-' {
            letters += 1;
        }
        n += 1;
        i += 1;
    }
    while i > start && b[i - 1] == b'-' {
        i -= 1;
    }
    let ends = i == b.len() || !b[i].is_ascii_alphanumeric();
    (ends && digits + letters >= 8 && digits > 0 && letters > 0).then_some(i)
}

fn floor_char(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn truncate(s: &mut String, max: usize) {
    if s.len() > max {
        let end = floor_char(s, max);
        s.truncate(end);
    }
}

/// The sample as shown: one line, at most `MAX_TEXT` bytes.
fn sample(text: &str) -> String {
    let mut s: String = text
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    truncate(&mut s, MAX_TEXT);
    s
}

/// Failures grouped by (class, normalised message).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reasons {
    pub list: Vec<Reason>,
}

impl Reasons {
    /// Count one failure whose normalised message is `key` (`text` is its message as said).
    /// Allocates only when the failure starts a new group.
    pub fn count(&mut self, class: ErrorClass, key: &str, text: &str) {
        self.add(class, key, || sample(text), 1);
    }

    fn add(&mut self, class: ErrorClass, key: &str, sample: impl FnOnce() -> String, n: u64) {
        if let Some(r) = self.list.iter_mut().find(|r| r.class == class && r.key == key) {
            r.count += n;
            return;
        }
        if self.list.len() < MAX_REASONS {
            self.list.push(Reason {
                class,
                key: key.to_string(),
                sample: sample(),
                count: n,
            });
            return;
        }
        match self.list.iter_mut().find(|r| r.class == class && r.key == OTHER) {
            Some(r) => r.count += n,
            None => self.list.push(Reason {
                class,
                key: OTHER.to_string(),
                sample: sample(),
                count: n,
            }),
        }
    }

    /// Add another recording's reasons (same bound, same overflow rule), then put them in their
    /// canonical order (class, then key) so merges do not depend on their order.
    pub fn absorb(&mut self, other: &Reasons) {
        for r in &other.list {
            self.add(r.class, &r.key, || r.sample.clone(), r.count);
        }
        self.list
            .sort_by(|a, b| (a.class.index(), &a.key).cmp(&(b.class.index(), &b.key)));
    }

    /// Up to `n` samples of one class, most frequent group first.
    pub fn samples(&self, class: ErrorClass, n: usize) -> Vec<String> {
        let mut of: Vec<&Reason> = self.list.iter().filter(|r| r.class == class).collect();
        of.sort_by_key(|r| std::cmp::Reverse(r.count));
        of.into_iter().take(n).map(|r| r.sample.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(text: &str, fixed: usize) -> String {
        let mut out = String::new();
        normalize(text, fixed, &mut out);
        out
    }

    #[test]
    fn masks_what_varies() {
        assert_eq!(
            norm("connect to 127.0.0.1:8080: Connection refused", 0),
            "connect to <addr>: Connection refused"
        );
        assert_eq!(
            norm("reset by [::1]:443 after 1234 bytes", 0),
            "reset by <addr> after <n> bytes"
        );
        assert_eq!(
            norm("request 3fa85f64-5717-4562-b3fc-2c963f66afa6 failed, id deadbeef12", 0),
            "request <id> failed, id <id>"
        );
        assert_eq!(
            norm("/tmp/out-17-3:  No such\nfile", 0),
            "/tmp/out-<n>-<n>: No such file"
        );
        // The fixed prefix keeps its numbers: a status or an exit code tells groups apart.
        assert_eq!(
            norm("HTTP/1.1 503 Busy: queue 17 full", 16),
            "HTTP/1.1 503 Busy: queue <n> full"
        );
        assert_eq!(
            norm("psql exited with code 2: FATAL:  sorry, too many clients already", 23),
            "psql exited with code 2: FATAL: sorry, too many clients already"
        );
        // Words that merely look hex stay, and so does non-ASCII text.
        assert_eq!(norm("bad cafe décor", 0), "bad cafe décor");
        assert_eq!(norm("v1.2.3.4.5", 0), "v<n>.<n>.<n>.<n>.<n>");
    }

    #[test]
    fn groups_are_bounded_and_merges_are_order_free() {
        let mut a = Reasons::default();
        for i in 0..40 {
            a.count(ErrorClass::Status, &format!("k{i}"), "t");
        }
        a.count(ErrorClass::Status, "k0", "t");
        assert_eq!(a.list.len(), MAX_REASONS + 1);
        assert_eq!(a.list.iter().map(|r| r.count).sum::<u64>(), 41);
        assert_eq!(a.list.iter().find(|r| r.key == OTHER).unwrap().count, 8);
        let mut x = Reasons::default();
        x.count(ErrorClass::Reset, "b", "b1");
        let mut y = Reasons::default();
        y.count(ErrorClass::Status, "a", "a1");
        y.count(ErrorClass::Reset, "b", "b2");
        let (mut xy, mut yx) = (Reasons::default(), Reasons::default());
        xy.absorb(&x);
        xy.absorb(&y);
        yx.absorb(&y);
        yx.absorb(&x);
        assert_eq!(
            xy.list.iter().map(|r| (&r.key, r.count)).collect::<Vec<_>>(),
            [(&"b".to_string(), 2), (&"a".to_string(), 1)]
        );
        assert_eq!(xy.list.len(), yx.list.len());
        assert_eq!(xy.samples(ErrorClass::Reset, 5), ["b1"]);
    }
}
