//! HPACK's Huffman code (RFC 7541 Appendix B): a table-driven decoder, and an encoder for the tests.

use std::sync::OnceLock;

use super::Bad;

/// The code of every byte, then EOS (256): its bits and its length.
const CODES: [u32; 256] = [
    0x1ff8, 0x7fffd8, 0xfffffe2, 0xfffffe3, 0xfffffe4, 0xfffffe5, 0xfffffe6, 0xfffffe7, 0xfffffe8, 0xffffea,
    0x3ffffffc, 0xfffffe9, 0xfffffea, 0x3ffffffd, 0xfffffeb, 0xfffffec, 0xfffffed, 0xfffffee, 0xfffffef, 0xffffff0,
    0xffffff1, 0xffffff2, 0x3ffffffe, 0xffffff3, 0xffffff4, 0xffffff5, 0xffffff6, 0xffffff7, 0xffffff8, 0xffffff9,
    0xffffffa, 0xffffffb, 0x14, 0x3f8, 0x3f9, 0xffa, 0x1ff9, 0x15, 0xf8, 0x7fa, 0x3fa, 0x3fb, 0xf9, 0x7fb, 0xfa, 0x16,
    0x17, 0x18, 0x0, 0x1, 0x2, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x5c, 0xfb, 0x7ffc, 0x20, 0xffb, 0x3fc,
    0x1ffa, 0x21, 0x5d, 0x5e, 0x5f, 0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x6b, 0x6c, 0x6d,
    0x6e, 0x6f, 0x70, 0x71, 0x72, 0xfc, 0x73, 0xfd, 0x1ffb, 0x7fff0, 0x1ffc, 0x3ffc, 0x22, 0x7ffd, 0x3, 0x23, 0x4,
    0x24, 0x5, 0x25, 0x26, 0x27, 0x6, 0x74, 0x75, 0x28, 0x29, 0x2a, 0x7, 0x2b, 0x76, 0x2c, 0x8, 0x9, 0x2d, 0x77, 0x78,
    0x79, 0x7a, 0x7b, 0x7ffe, 0x7fc, 0x3ffd, 0x1ffd, 0xffffffc, 0xfffe6, 0x3fffd2, 0xfffe7, 0xfffe8, 0x3fffd3,
    0x3fffd4, 0x3fffd5, 0x7fffd9, 0x3fffd6, 0x7fffda, 0x7fffdb, 0x7fffdc, 0x7fffdd, 0x7fffde, 0xffffeb, 0x7fffdf,
    0xffffec, 0xffffed, 0x3fffd7, 0x7fffe0, 0xffffee, 0x7fffe1, 0x7fffe2, 0x7fffe3, 0x7fffe4, 0x1fffdc, 0x3fffd8,
    0x7fffe5, 0x3fffd9, 0x7fffe6, 0x7fffe7, 0xffffef, 0x3fffda, 0x1fffdd, 0xfffe9, 0x3fffdb, 0x3fffdc, 0x7fffe8,
    0x7fffe9, 0x1fffde, 0x7fffea, 0x3fffdd, 0x3fffde, 0xfffff0, 0x1fffdf, 0x3fffdf, 0x7fffeb, 0x7fffec, 0x1fffe0,
    0x1fffe1, 0x3fffe0, 0x1fffe2, 0x7fffed, 0x3fffe1, 0x7fffee, 0x7fffef, 0xfffea, 0x3fffe2, 0x3fffe3, 0x3fffe4,
    0x7ffff0, 0x3fffe5, 0x3fffe6, 0x7ffff1, 0x3ffffe0, 0x3ffffe1, 0xfffeb, 0x7fff1, 0x3fffe7, 0x7ffff2, 0x3fffe8,
    0x1ffffec, 0x3ffffe2, 0x3ffffe3, 0x3ffffe4, 0x7ffffde, 0x7ffffdf, 0x3ffffe5, 0xfffff1, 0x1ffffed, 0x7fff2,
    0x1fffe3, 0x3ffffe6, 0x7ffffe0, 0x7ffffe1, 0x3ffffe7, 0x7ffffe2, 0xfffff2, 0x1fffe4, 0x1fffe5, 0x3ffffe8,
    0x3ffffe9, 0xffffffd, 0x7ffffe3, 0x7ffffe4, 0x7ffffe5, 0xfffec, 0xfffff3, 0xfffed, 0x1fffe6, 0x3fffe9, 0x1fffe7,
    0x1fffe8, 0x7ffff3, 0x3fffea, 0x3fffeb, 0x1ffffee, 0x1ffffef, 0xfffff4, 0xfffff5, 0x3ffffea, 0x7ffff4, 0x3ffffeb,
    0x7ffffe6, 0x3ffffec, 0x3ffffed, 0x7ffffe7, 0x7ffffe8, 0x7ffffe9, 0x7ffffea, 0x7ffffeb, 0xffffffe, 0x7ffffec,
    0x7ffffed, 0x7ffffee, 0x7ffffef, 0x7fffff0, 0x3ffffee,
];
const LENGTHS: [u8; 256] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28,
    28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12,
    10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6,
    5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22,
    22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22, 21, 20,
    22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28,
    27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28,
    27, 27, 27, 27, 27, 26,
];
const EOS: (u32, u8) = (0x3fff_ffff, 30);

/// Codes up to this many bits are read with one lookup.
const FAST: u32 = 12;

/// The decoding tables: for every `FAST`-bit prefix the byte whose code it starts with and the code's
/// length (0: a longer code); and, for the longer codes, the canonical code's layout by length (the
/// HPACK code is canonical: the codes of one length are consecutive, in the order of their bytes).
struct Tables {
    fast: Vec<u16>,
    /// Per length: the first code, how many codes, and where their bytes start in `sorted`.
    first: [u32; 31],
    count: [u32; 31],
    offset: [usize; 31],
    sorted: Vec<u16>,
}

fn tables() -> &'static Tables {
    static T: OnceLock<Tables> = OnceLock::new();
    T.get_or_init(|| {
        let code = |s: usize| if s == 256 { EOS } else { (CODES[s], LENGTHS[s]) };
        let mut fast = vec![0u16; 1 << FAST];
        for s in 0..256 {
            let (c, len) = code(s);
            let len = u32::from(len);
            if len <= FAST {
                let base = (c << (FAST - len)) as usize;
                for slot in &mut fast[base..base + (1 << (FAST - len))] {
                    *slot = (len as u16) << 8 | s as u16;
                }
            }
        }
        let mut sorted: Vec<u16> = (0..=256).collect();
        sorted.sort_by_key(|&s| (code(usize::from(s)).1, code(usize::from(s)).0));
        let (mut first, mut count, mut offset) = ([0u32; 31], [0u32; 31], [0usize; 31]);
        for (i, &s) in sorted.iter().enumerate() {
            let (c, len) = code(usize::from(s));
            let len = usize::from(len);
            if count[len] == 0 {
                first[len] = c;
                offset[len] = i;
            }
            count[len] += 1;
        }
        Tables {
            fast,
            first,
            count,
            offset,
            sorted,
        }
    })
}

/// Decode a Huffman-coded string onto `out`.
pub fn huffman_decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), Bad> {
    let t = tables();
    // The next bits, most significant first, and how many there are.
    let mut acc = 0u64;
    let mut bits = 0u32;
    let mut rest = src;
    loop {
        while bits <= 56 {
            let Some((&byte, r)) = rest.split_first() else { break };
            acc |= u64::from(byte) << (56 - bits);
            bits += 8;
            rest = r;
        }
        if bits == 0 {
            return Ok(());
        }
        let e = t.fast[(acc >> (64 - FAST)) as usize];
        let len = u32::from(e >> 8);
        if len != 0 && len <= bits {
            out.push(e as u8);
            acc <<= len;
            bits -= len;
            continue;
        }
        if rest.is_empty() && bits < 8 {
            // The end: up to 7 bits of padding, the most significant bits of EOS (all ones).
            return if acc >> (64 - bits) == (1 << bits) - 1 {
                Ok(())
            } else {
                Err(Bad("Huffman padding that is not EOS"))
            };
        }
        let mut found = false;
        for l in FAST + 1..=30 {
            if l > bits {
                break;
            }
            let c = (acc >> (64 - l)) as u32;
            let li = l as usize;
            if t.count[li] > 0 && c >= t.first[li] && c - t.first[li] < t.count[li] {
                let s = t.sorted[t.offset[li] + (c - t.first[li]) as usize];
                if s == 256 {
                    return Err(Bad("EOS inside a Huffman string"));
                }
                out.push(s as u8);
                acc <<= l;
                bits -= l;
                found = true;
                break;
            }
        }
        if !found {
            return Err(Bad("a Huffman code that does not end"));
        }
    }
}

#[cfg(test)]
pub fn huffman_encode(src: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u64, 0u32);
    for &b in src {
        let (c, len) = (u64::from(CODES[usize::from(b)]), u32::from(LENGTHS[usize::from(b)]));
        acc = acc << len | c;
        bits += len;
        while bits >= 8 {
            out.push((acc >> (bits - 8)) as u8);
            bits -= 8;
        }
    }
    if bits > 0 {
        out.push(((acc << (8 - bits)) as u8) | ((1u8 << (8 - bits)) - 1));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_is_canonical_and_every_byte_round_trips() {
        let t = tables();
        // Canonical: assigning codes by (length, byte) reproduces the table.
        let mut next = 0u32;
        let mut prev_len = 0u8;
        for &s in &t.sorted {
            let (c, len) = if s == 256 {
                EOS
            } else {
                (CODES[usize::from(s)], LENGTHS[usize::from(s)])
            };
            next <<= len - prev_len;
            assert_eq!(c, next, "byte {s}");
            next += 1;
            prev_len = len;
        }
        let all: Vec<u8> = (0..=255).collect();
        for chunk in [
            &all[..],
            b"",
            b"a",
            b"www.example.com",
            b"Mon, 21 Oct 2013 20:13:21 GMT",
        ] {
            let mut out = Vec::new();
            huffman_decode(&huffman_encode(chunk), &mut out).unwrap();
            assert_eq!(out, chunk);
        }
        // RFC 7541 C.4.1.
        let mut out = Vec::new();
        huffman_decode(
            &[0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff],
            &mut out,
        )
        .unwrap();
        assert_eq!(out, b"www.example.com");
        // Padding of zeros, or longer than 7 bits, is refused.
        assert!(huffman_decode(
            &[0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0x00],
            &mut out
        )
        .is_err());
        assert!(huffman_decode(&[0xff, 0xff], &mut out).is_err());
    }
}
