//! HPACK (RFC 7541) as knee needs it: a request's header block encoded once per group (literals that the
//! server does not index, names from the static table where it has them, no Huffman), and a decoder of
//! responses' header blocks that keeps the dynamic table in step with the server's but builds almost nothing:
//! it reads `:status`, and gRPC's `grpc-status` and `grpc-message` (in headers or trailers), and for every
//! other field counts only what the table's size needs (a string is Huffman-decoded only when its decoded
//! length enters the table, or when it is one of those three). `huffman`: the code (RFC 7541 Appendix B).

use std::collections::VecDeque;

mod huffman;

use huffman::huffman_decode;
#[cfg(test)]
pub use huffman::huffman_encode;

/// The dynamic table's size knee allows (SETTINGS_HEADER_TABLE_SIZE, left at its default).
pub const TABLE_SIZE: usize = 4096;

/// The static table's names (RFC 7541 Appendix A), index 1 first; entries 8–14 are `:status` with the
/// values in `STATIC_STATUS`.
const STATIC_NAMES: [&str; 61] = [
    ":authority",
    ":method",
    ":method",
    ":path",
    ":path",
    ":scheme",
    ":scheme",
    ":status",
    ":status",
    ":status",
    ":status",
    ":status",
    ":status",
    ":status",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "accept",
    "access-control-allow-origin",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "content-disposition",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-range",
    "content-type",
    "cookie",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "link",
    "location",
    "max-forwards",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "refresh",
    "retry-after",
    "server",
    "set-cookie",
    "strict-transport-security",
    "transfer-encoding",
    "user-agent",
    "vary",
    "via",
    "www-authenticate",
];
const STATIC_STATUS: [u16; 7] = [200, 204, 206, 304, 400, 404, 500];
/// Why a header block could not be decoded (a connection error, COMPRESSION_ERROR).
#[derive(Debug, PartialEq, Eq)]
pub struct Bad(pub &'static str);

// ---- encoding ----

/// Append an integer with an `n`-bit prefix; `first` holds the representation's bits above the prefix.
pub fn put_int(out: &mut Vec<u8>, first: u8, n: u32, mut value: usize) {
    let max = (1usize << n) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    value -= max;
    while value >= 128 {
        out.push((value % 128 + 128) as u8);
        value /= 128;
    }
    out.push(value as u8);
}

/// Append a string literal, not Huffman-coded.
pub fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_int(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// A field the server must not index, its name the static table's `index` (0: the name follows).
pub fn put_field(out: &mut Vec<u8>, index: usize, name: &[u8], value: &[u8]) {
    put_int(out, 0, 4, index);
    if index == 0 {
        put_str(out, name);
    }
    put_str(out, value);
}

/// The static table's index of `name` (the first entry with it), if it has one.
pub fn static_name(name: &str) -> Option<usize> {
    STATIC_NAMES.iter().position(|n| *n == name).map(|i| i + 1)
}

/// An entry of the static table with exactly this name and value.
pub fn static_field(name: &str, value: &str) -> Option<usize> {
    let first = static_name(name)?;
    (first..=STATIC_NAMES.len())
        .take_while(|&i| STATIC_NAMES[i - 1] == name)
        .find(|&i| static_value(i) == Some(value))
}

fn static_value(index: usize) -> Option<&'static str> {
    Some(match index {
        2 => "GET",
        3 => "POST",
        4 => "/",
        5 => "/index.html",
        6 => "http",
        7 => "https",
        _ => return None,
    })
}

// ---- decoding ----

/// What knee reads of a response's header block (headers or trailers): the last of each field it holds.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Fields {
    pub status: Option<u16>,
    /// gRPC's status code (a value that is not a number reads as 2, UNKNOWN, as gRPC's clients read it).
    pub grpc_status: Option<u32>,
    /// gRPC's message, percent-encoded as sent.
    pub grpc_message: Option<Box<[u8]>>,
}

/// A field's name, as far as knee reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Other,
    Status,
    GrpcStatus,
    GrpcMessage,
}

impl Kind {
    fn of(name: &[u8]) -> Kind {
        match name {
            b":status" => Kind::Status,
            b"grpc-status" => Kind::GrpcStatus,
            b"grpc-message" => Kind::GrpcMessage,
            _ => Kind::Other,
        }
    }
}

impl Fields {
    fn read(&mut self, kind: Kind, value: &[u8]) {
        match kind {
            Kind::Status => {
                if let Some(s) = three_digits(value) {
                    self.status = Some(s);
                }
            }
            Kind::GrpcStatus => {
                let code = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
                self.grpc_status = Some(code.unwrap_or(2));
            }
            Kind::GrpcMessage => self.grpc_message = Some(value.into()),
            Kind::Other => {}
        }
    }
}

/// A field's value, kept when knee reads fields of its kind.
type Value = Option<Box<[u8]>>;

/// A dynamic table entry: its size (name + value + 32), and what knee reads of it.
struct Entry {
    size: usize,
    name_len: usize,
    kind: Kind,
    /// Its value, kept for the fields knee reads.
    value: Value,
}

/// A response header block decoder: the dynamic table, and a buffer for the strings it must decode.
pub struct Decoder {
    table: VecDeque<Entry>,
    size: usize,
    max: usize,
    scratch: Vec<u8>,
}

impl Default for Decoder {
    fn default() -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max: TABLE_SIZE,
            scratch: Vec::with_capacity(64),
        }
    }
}

/// What knee reads of a field's name.
#[derive(Clone, Copy)]
struct Name {
    len: usize,
    kind: Kind,
}

impl Decoder {
    /// Decode a whole header block: the fields knee reads in it.
    pub fn decode(&mut self, mut b: &[u8]) -> Result<Fields, Bad> {
        let mut out = Fields::default();
        let mut fields = false;
        while let Some(&first) = b.first() {
            // A size update comes only before the block's fields (RFC 7541 §4.2).
            let update = first & 0xe0 == 0x20;
            if update && fields {
                return Err(Bad("a dynamic table size update after a field"));
            }
            fields |= !update;
            if first & 0x80 != 0 {
                // Indexed field.
                let index = int(&mut b, 7)?;
                match index {
                    0 => return Err(Bad("index 0")),
                    8..=14 => out.status = Some(STATIC_STATUS[index - 8]),
                    1..=61 => {}
                    _ => {
                        let e = self.table.get(index - 62).ok_or(Bad("an index beyond the table"))?;
                        if let Some(v) = &e.value {
                            out.read(e.kind, v);
                        }
                    }
                }
            } else if first & 0x40 != 0 {
                // Literal, added to the table.
                let index = int(&mut b, 6)?;
                let name = self.name(&mut b, index)?;
                let (len, value) = self.value(&mut b, true, name.kind)?;
                if let Some(v) = &value {
                    out.read(name.kind, v);
                }
                self.insert(Entry {
                    size: name.len + len + 32,
                    name_len: name.len,
                    kind: name.kind,
                    value,
                });
            } else if first & 0x20 != 0 {
                // Dynamic table size update.
                let max = int(&mut b, 5)?;
                if max > TABLE_SIZE {
                    return Err(Bad("a dynamic table size above the one allowed"));
                }
                self.max = max;
                self.evict(0);
            } else {
                // Literal not added (without indexing, or never indexed).
                let index = int(&mut b, 4)?;
                let name = self.name(&mut b, index)?;
                if let (_, Some(v)) = self.value(&mut b, false, name.kind)? {
                    out.read(name.kind, &v);
                }
            }
        }
        Ok(out)
    }

    /// A literal's name: the table's (`index` > 0, static then dynamic) or the string that follows.
    fn name(&mut self, b: &mut &[u8], index: usize) -> Result<Name, Bad> {
        match index {
            0 => {}
            1..=61 => {
                let name = STATIC_NAMES[index - 1];
                return Ok(Name {
                    len: name.len(),
                    kind: Kind::of(name.as_bytes()),
                });
            }
            _ => {
                let e = self.table.get(index - 62).ok_or(Bad("an index beyond the table"))?;
                return Ok(Name {
                    len: e.name_len,
                    kind: e.kind,
                });
            }
        }
        let (huffman, raw) = string(b)?;
        let name = if huffman {
            self.scratch.clear();
            huffman_decode(raw, &mut self.scratch)?;
            &self.scratch[..]
        } else {
            raw
        };
        Ok(Name {
            len: name.len(),
            kind: Kind::of(name),
        })
    }

    /// A literal's value: its decoded length when `sized` (it enters the table), and the value itself when
    /// knee reads fields of its `kind`.
    fn value(&mut self, b: &mut &[u8], sized: bool, kind: Kind) -> Result<(usize, Value), Bad> {
        let (huffman, raw) = string(b)?;
        let read = kind != Kind::Other;
        if !huffman {
            return Ok((raw.len(), read.then(|| raw.into())));
        }
        if !sized && !read {
            return Ok((0, None));
        }
        self.scratch.clear();
        huffman_decode(raw, &mut self.scratch)?;
        Ok((self.scratch.len(), read.then(|| self.scratch[..].into())))
    }

    fn insert(&mut self, e: Entry) {
        if e.size > self.max {
            // Larger than the table: it empties the table and is not added (RFC 7541 §4.4).
            self.table.clear();
            self.size = 0;
            return;
        }
        self.evict(e.size);
        self.size += e.size;
        self.table.push_front(e);
    }

    /// Evict the oldest entries until `room` more fits.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            match self.table.pop_back() {
                Some(e) => self.size -= e.size,
                None => break,
            }
        }
    }

    #[cfg(test)]
    fn size(&self) -> usize {
        self.size
    }
}

fn three_digits(v: &[u8]) -> Option<u16> {
    match v {
        [a, b, c] if v.iter().all(u8::is_ascii_digit) => {
            Some(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
        }
        _ => None,
    }
}

/// An integer with an `n`-bit prefix (RFC 7541 §5.1), advancing `b` past it.
fn int(b: &mut &[u8], n: u32) -> Result<usize, Bad> {
    let max = (1usize << n) - 1;
    let (&first, rest) = b.split_first().ok_or(Bad("a truncated integer"))?;
    *b = rest;
    let mut value = usize::from(first) & max;
    if value < max {
        return Ok(value);
    }
    let mut shift = 0u32;
    loop {
        let (&byte, rest) = b.split_first().ok_or(Bad("a truncated integer"))?;
        *b = rest;
        if shift > 28 {
            return Err(Bad("an integer too large"));
        }
        value += usize::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
}

/// A string literal: Huffman-coded or not, and its bytes as sent.
fn string<'a>(b: &mut &'a [u8]) -> Result<(bool, &'a [u8]), Bad> {
    let huffman = b.first().ok_or(Bad("a truncated string"))? & 0x80 != 0;
    let len = int(b, 7)?;
    if len > b.len() {
        return Err(Bad("a truncated string"));
    }
    let (s, rest) = b.split_at(len);
    *b = rest;
    Ok((huffman, s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(status: u16) -> Fields {
        Fields {
            status: Some(status),
            ..Fields::default()
        }
    }

    #[test]
    fn the_decoder_keeps_the_table_and_reads_the_status() {
        let mut d = Decoder::default();
        // RFC 7541 C.6.1's first field: `:status: 302`, Huffman, added to the table (42 bytes).
        assert_eq!(d.decode(&[0x48, 0x82, 0x64, 0x02]), Ok(st(302)));
        assert_eq!(d.size(), 42);
        // Indexed static 200; then the dynamic entry 62 (the 302).
        assert_eq!(d.decode(&[0x88]), Ok(st(200)));
        assert_eq!(d.decode(&[0xbe]), Ok(st(302)));
        // A literal with a new name, added: `x-a: b` (size 3 + 1 + 32); the 302 is now 63.
        let mut b = vec![0x40];
        put_str(&mut b, b"x-a");
        put_str(&mut b, b"b");
        assert_eq!(d.decode(&b), Ok(Fields::default()));
        assert_eq!(d.size(), 42 + 36);
        assert_eq!(d.decode(&[0xbf]), Ok(st(302)));
        // A literal `:status` by a Huffman name, not indexed.
        let mut b = vec![0x00, 0x80 | huffman_encode(b":status").len() as u8];
        b.extend(huffman_encode(b":status"));
        put_str(&mut b, b"503");
        assert_eq!(d.decode(&b), Ok(st(503)));
        // A size update evicts: 40 keeps the newest entry only.
        assert_eq!(d.decode(&[0x3f, 0x09]), Ok(Fields::default()));
        assert_eq!(d.size(), 36);
        assert!(d.decode(&[0xbf]).is_err());
        // An entry larger than the table empties it.
        let mut b = vec![0x40];
        put_str(&mut b, b"x-long");
        put_str(&mut b, &[b'v'; 40]);
        assert_eq!(d.decode(&b), Ok(Fields::default()));
        assert_eq!(d.size(), 0);
        // A size update after a field, above the allowed size, and truncated blocks are errors.
        assert!(d.decode(&[0x88, 0x3f, 0x09]).is_err());
        assert!(d.decode(&[0x3f, 0xe2, 0x1f]).is_err());
        assert!(d.decode(&[0x40, 0x05, b'a']).is_err());
        assert!(d.decode(&[0xff]).is_err());
    }

    #[test]
    fn grpc_s_status_and_message_are_read_from_trailers_and_the_table() {
        let mut d = Decoder::default();
        // Trailers: `grpc-status: 8` added to the table, `grpc-message` (Huffman, not indexed).
        let mut b = vec![0x40];
        put_str(&mut b, b"grpc-status");
        put_str(&mut b, b"8");
        let msg = huffman_encode(b"too many calls%3A 4");
        b.extend([0x00, 0x80 | huffman_encode(b"grpc-message").len() as u8]);
        b.extend(huffman_encode(b"grpc-message"));
        b.push(0x80 | msg.len() as u8);
        b.extend(&msg);
        let f = d.decode(&b).unwrap();
        assert_eq!((f.status, f.grpc_status), (None, Some(8)));
        assert_eq!(f.grpc_message.as_deref(), Some(&b"too many calls%3A 4"[..]));
        // The next response's trailers name it from the table (entry 62); headers: 200 and a content-type.
        let f = d.decode(&[0x88, 0xbe]).unwrap();
        assert_eq!((f.status, f.grpc_status, f.grpc_message), (Some(200), Some(8), None));
        // A status that is not a number reads as UNKNOWN (2).
        let mut b = vec![0x00];
        put_str(&mut b, b"grpc-status");
        put_str(&mut b, b"x");
        assert_eq!(d.decode(&b).unwrap().grpc_status, Some(2));
    }

    #[test]
    fn integers_round_trip_through_their_prefixes() {
        for n in [4, 5, 6, 7] {
            for v in [0usize, 1, 14, 15, 30, 31, 62, 63, 126, 127, 128, 1337, 1 << 20] {
                let mut out = Vec::new();
                put_int(&mut out, 0, n, v);
                let mut b = &out[..];
                assert_eq!(int(&mut b, n), Ok(v));
                assert!(b.is_empty());
            }
        }
        assert_eq!(static_field(":method", "POST"), Some(3));
        assert_eq!(static_field(":path", "/"), Some(4));
        assert_eq!(static_name("content-length"), Some(28));
    }
}
