//! WebSocket frames as knee reads them (RFC 6455 §5.2), and the SHA-1 of the opening handshake's accept key.

use crate::class::ErrorClass;
use crate::outcome::Detail;

/// The GUID the server's Sec-WebSocket-Accept hashes the client's key with (RFC 6455 §1.3).
pub(super) const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/// The largest message knee takes (a server that sends more is failed as `protocol`).
pub(super) const MAX_MESSAGE: usize = 16 << 20;

pub(super) const OP_CONT: u8 = 0x0;
pub(super) const OP_TEXT: u8 = 0x1;
pub(super) const OP_BINARY: u8 = 0x2;
pub(super) const OP_CLOSE: u8 = 0x8;
pub(super) const OP_PING: u8 = 0x9;
pub(super) const OP_PONG: u8 = 0xA;

/// A frame header at the start of `b`: (opcode, fin, payload start, payload length), None while incomplete.
pub(super) fn parse_header(b: &[u8], d: &mut Detail) -> Result<Option<(u8, bool, usize, usize)>, ErrorClass> {
    if b.len() < 2 {
        return Ok(None);
    }
    let (fin, rsv, op) = (b[0] & 0x80 != 0, b[0] & 0x70, b[0] & 0x0f);
    if rsv != 0 {
        d.clear().put(format_args!(
            "a frame with reserved bits set (an extension knee did not ask for)"
        ));
        return Err(ErrorClass::Protocol);
    }
    let masked = b[1] & 0x80 != 0;
    let (len, at) = match b[1] & 0x7f {
        126 if b.len() >= 4 => (u16::from_be_bytes([b[2], b[3]]) as usize, 4),
        127 if b.len() >= 10 => {
            let n = u64::from_be_bytes(b[2..10].try_into().expect("8 bytes"));
            (usize::try_from(n).unwrap_or(usize::MAX), 10)
        }
        126 | 127 => return Ok(None),
        n => (n as usize, 2),
    };
    if masked {
        d.clear().put(format_args!(
            "a masked frame from the server (RFC 6455 §5.1: a server never masks)"
        ));
        return Err(ErrorClass::Protocol);
    }
    if len > MAX_MESSAGE || (op >= 0x8 && (len > 125 || !fin)) {
        d.clear().put(format_args!(
            "a frame of {len} bytes (opcode {op:#x}): over what knee takes"
        ));
        return Err(ErrorClass::Protocol);
    }
    Ok(Some((op, fin, at, len)))
}

/// SHA-1 of the parts joined (FIPS 180-4), for the handshake's Sec-WebSocket-Accept only.
pub(super) fn sha1(parts: &[&[u8]]) -> [u8; 20] {
    let mut data: Vec<u8> = parts.concat();
    let bits = (data.len() as u64) * 8;
    data.push(0x80);
    while data.len() % 64 != 56 {
        data.push(0);
    }
    data.extend_from_slice(&bits.to_be_bytes());
    let mut h: [u32; 5] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0];
    for block in data.chunks(64) {
        let mut w = [0u32; 80];
        for (i, c) in block.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 20];
    for (i, x) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    /// RFC 6455 §1.3's example: the key "dGhlIHNhbXBsZSBub25jZQ==" is accepted as "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=".
    #[test]
    fn the_accept_hash_is_the_rfc_s_example() {
        let accept = base64::engine::general_purpose::STANDARD.encode(sha1(&[b"dGhlIHNhbXBsZSBub25jZQ==", GUID]));
        assert_eq!(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        // FIPS 180-4's "abc", and a message longer than one block
        let hex = |b: [u8; 20]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        assert_eq!(hex(sha1(&[b"abc"])), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(
            hex(sha1(&[b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"])),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
        );
    }

    #[test]
    fn frame_headers_parse_in_pieces_and_refuse_masked_frames() {
        let mut d = Detail::default();
        assert_eq!(parse_header(&[0x81], &mut d).unwrap(), None);
        assert_eq!(parse_header(&[0x81, 5], &mut d).unwrap(), Some((OP_TEXT, true, 2, 5)));
        assert_eq!(parse_header(&[0x02, 126, 1], &mut d).unwrap(), None);
        assert_eq!(
            parse_header(&[0x02, 126, 1, 0], &mut d).unwrap(),
            Some((OP_BINARY, false, 4, 256))
        );
        assert!(matches!(parse_header(&[0x81, 0x85], &mut d), Err(ErrorClass::Protocol)));
        assert!(d.text.contains("masked frame"), "{}", d.text);
    }
}
