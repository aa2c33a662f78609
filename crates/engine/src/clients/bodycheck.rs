//! What a response body's checks need of it, as the body comes in pieces (HTTP/1.1's reads, HTTP/2's DATA frames).
//!
//! A substring (`expect_body`) is searched as the body streams in: in each piece, and across the seam between it and
//! the pieces before (the body's last bytes, one fewer than the substring's, carried), so a body of any length is
//! checked in the memory of the substring. A regex (`expect_body_regex`) reads the body kept from its start, as far
//! as `REGEX_BODY_MAX`: that much is what a client holds for it. The body's first bytes are kept besides, to quote in
//! a failure's reason. Before, every check kept the whole body: 50 clients fetching a 1 GB file with `expect_body`
//! held 50 GB.

use std::sync::Arc;

use memchr::memmem::Finder;
use regex::bytes::Regex;

use crate::class::ErrorClass;
use crate::outcome::{Detail, Outcome};

/// The most of a body a regex check reads, and a client keeps for it.
pub(crate) const REGEX_BODY_MAX: usize = 16 << 20;
/// Body bytes kept to quote in a failure's reason: a status not expected, or a check that failed (HTTP/1.1 and 2).
pub(crate) const QUOTED_BODY: usize = 240;

/// What a request's checks need of its response body: the substring to search for, and how much of the body to keep
/// (a regex's read, or a quote).
#[derive(Clone, Copy)]
pub(crate) struct Wants<'a> {
    pub find: Option<&'a Arc<Finder<'static>>>,
    pub keep: usize,
}

impl Wants<'_> {
    /// Only the body's first `n` bytes, to quote (a response with an unexpected status).
    pub fn quote(n: usize) -> Wants<'static> {
        Wants { find: None, keep: n }
    }
}

/// A request's checks of its response body (`expect_body`, `expect_body_regex`, `expect_length`), made once.
pub(crate) struct Checks {
    find: Option<Arc<Finder<'static>>>,
    regex: Option<Regex>,
    length: Option<u64>,
}

impl Checks {
    pub fn new(substring: Option<&str>, regex: Option<Regex>, length: Option<u64>) -> Checks {
        Checks {
            find: substring.map(|s| Arc::new(Finder::new(s.as_bytes()).into_owned())),
            regex,
            length,
        }
    }

    /// What the checks need of a response's body: the substring to search for, and the body kept for a regex (or
    /// its start, to quote when the substring is not found).
    pub fn wants(&self) -> Wants<'_> {
        let keep = if self.regex.is_some() {
            REGEX_BODY_MAX
        } else if self.find.is_some() {
            QUOTED_BODY
        } else {
            0
        };
        Wants {
            find: self.find.as_ref(),
            keep,
        }
    }

    /// A response body of `len` bytes, read into `body` as `wants` said: the check that failed, in `d`, or Ok.
    pub fn judge(&self, len: u64, body: &BodyCheck, d: &mut Detail) -> Outcome {
        let kept = body.kept();
        if let Some(n) = self.length.filter(|&n| n != len) {
            d.clear().put(format_args!("body of {len} bytes, expected {n}"));
            Outcome::Fail(ErrorClass::Length)
        } else if !body.found() {
            d.clear()
                .put(format_args!("body does not contain expect_body"))
                .fix()
                .quoted(kept, 120);
            Outcome::Fail(ErrorClass::Body)
        } else if self.regex.as_ref().is_some_and(|re| !regex_holds(re, kept, len)) {
            d.clear().put(format_args!("body does not match expect_body_regex"));
            if (kept.len() as u64) < len {
                d.put(format_args!(
                    " in its first {} MiB, as far as a regex reads",
                    REGEX_BODY_MAX >> 20
                ));
            }
            d.fix().quoted(kept, 120);
            Outcome::Fail(ErrorClass::Body)
        } else {
            Outcome::Ok
        }
    }
}

/// A regex held against a body as kept (`len`: the body's whole length): the whole of it; or, cut at
/// `REGEX_BODY_MAX`, a match that ends before the cut (one that needs the text's end, `\z` or a last `$`, would end
/// at the cut, and the body goes on past it).
fn regex_holds(re: &Regex, kept: &[u8], len: u64) -> bool {
    if kept.len() as u64 >= len {
        return re.is_match(kept);
    }
    re.find_iter(kept).any(|m| m.end() < kept.len())
}

/// One response body's checks as it comes; a client's, reused from one response to the next. Boxed, and only once a
/// response wants any of its body: a client without checks holds a pointer (10 000 clients hold this each).
#[derive(Default)]
pub(crate) struct BodyCheck(Option<Box<Checking>>);

#[derive(Default)]
struct Checking {
    /// The body from its start, as far as the `keep` it started with.
    kept: Vec<u8>,
    keep: usize,
    find: Option<Arc<Finder<'static>>>,
    /// The substring was found, or there is none to find.
    found: bool,
    /// The body's last bytes so far, fewer than the substring's (a match across the next piece's seam).
    carry: Vec<u8>,
}

impl BodyCheck {
    /// Begin a response's body.
    pub fn start(&mut self, wants: Wants<'_>) {
        if wants.keep == 0 && wants.find.is_none() && self.0.is_none() {
            return; // nothing wanted, nothing held
        }
        let c = self.0.get_or_insert_with(Box::default);
        c.kept.clear();
        c.carry.clear();
        c.keep = wants.keep;
        match (wants.find, &c.find) {
            // the same request's substring as the last response's: no count to move on a counter every thread shares
            (Some(w), Some(had)) if Arc::ptr_eq(w, had) => {}
            _ => c.find = wants.find.cloned(),
        }
        c.found = c.find.as_ref().is_none_or(|f| f.needle().is_empty());
    }

    /// The next piece of the body.
    pub fn put(&mut self, data: &[u8]) {
        if let Some(c) = self.0.as_deref_mut() {
            c.put(data);
        }
    }

    /// The body as kept (its start).
    pub fn kept(&self) -> &[u8] {
        self.0.as_ref().map_or(&[], |c| &c.kept)
    }

    /// The substring was found in the body (true when there was none to find).
    pub fn found(&self) -> bool {
        self.0.as_ref().is_none_or(|c| c.found)
    }
}

impl Checking {
    fn put(&mut self, data: &[u8]) {
        let room = self.keep.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&data[..data.len().min(room)]);
        let Some(f) = self.find.as_deref().filter(|_| !self.found) else {
            return;
        };
        let seam = f.needle().len() - 1; // ≥ 0: an empty substring is found at the start
        let had = self.carry.len();
        self.carry.extend_from_slice(&data[..data.len().min(seam)]);
        if (had > 0 && f.find(&self.carry).is_some()) || f.find(data).is_some() {
            self.found = true;
            self.carry.clear();
            return;
        }
        if data.len() >= seam {
            self.carry.clear();
            self.carry.extend_from_slice(&data[data.len() - seam..]);
        } else {
            // the whole piece was carried: keep the last `seam` bytes of the carry and it
            let over = self.carry.len().saturating_sub(seam);
            self.carry.drain(..over);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(needle: &str, pieces: &[&[u8]], keep: usize) -> BodyCheck {
        let f = Arc::new(Finder::new(needle.as_bytes()).into_owned());
        let mut c = BodyCheck::default();
        c.start(Wants { find: Some(&f), keep });
        for p in pieces {
            c.put(p);
        }
        c
    }

    #[test]
    fn a_substring_is_found_in_a_piece_and_across_every_seam() {
        let body = b"0123456789abcdefghij";
        for needle in ["", "0", "9a", "456789ab", "hij", "0123456789abcdefghij"] {
            // every split of the body into pieces of 1, 2, 3 … bytes
            for size in 1..=body.len() {
                let pieces: Vec<&[u8]> = body.chunks(size).collect();
                assert!(check(needle, &pieces, 0).found(), "{needle:?} in pieces of {size}");
            }
        }
        for needle in ["ja", "0123456789abcdefghijk", "aa"] {
            for size in 1..=body.len() {
                let pieces: Vec<&[u8]> = body.chunks(size).collect();
                assert!(!check(needle, &pieces, 0).found(), "{needle:?} in pieces of {size}");
            }
        }
    }

    #[test]
    fn memory_stays_the_substrings_whatever_the_body() {
        let piece = vec![b'x'; 64 * 1024];
        let mut pieces: Vec<&[u8]> = vec![&piece; 1600]; // 100 MiB
        pieces.push(b"xxEND");
        let c = check("END", &pieces, 240);
        assert!(c.found());
        assert_eq!(c.kept().len(), 240);
        let carry = c.0.as_ref().map(|c| c.carry.capacity());
        assert!(carry.is_some_and(|n| n < 64), "{carry:?}");
    }

    #[test]
    fn without_a_substring_the_body_is_kept_as_far_as_asked() {
        let mut c = BodyCheck::default();
        c.start(Wants { find: None, keep: 5 });
        c.put(b"abc");
        c.put(b"defg");
        assert_eq!((c.kept(), c.found()), (&b"abcde"[..], true));
        c.start(Wants { find: None, keep: 0 });
        c.put(b"abc");
        assert!(c.kept().is_empty());
        // a client that never wanted any of a body holds no buffers
        let mut none = BodyCheck::default();
        none.start(Wants { find: None, keep: 0 });
        none.put(b"abc");
        assert!(none.0.is_none() && none.found() && none.kept().is_empty());
    }
}
