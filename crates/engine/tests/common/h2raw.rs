//! The pieces of a hand-rolled h2c server (tests that need a server to misbehave in a way the `h2` crate's
//! will not, or to allocate nothing per request): the prefaces, a frame's header, the answer "200 ok".
//! Allocation-free.

use std::io::{self, Read, Write};
use std::net::TcpStream;

/// A frame header's length.
pub const FRAME_HEADER: usize = 9;
/// A SETTINGS frame that acknowledges the client's.
pub const SETTINGS_ACK: [u8; 9] = [0, 0, 0, 4, 1, 0, 0, 0, 0];

/// Reads the client's connection preface and sends the server's (an empty SETTINGS).
pub fn h2_prefaces(s: &mut TcpStream) -> io::Result<()> {
    let mut preface = [0u8; 24];
    s.read_exact(&mut preface)?;
    s.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0])
}

/// The first frame in `buf` once all of it has arrived: its type, flags, stream id (as sent) and length,
/// header included.
pub fn h2_frame(buf: &[u8]) -> Option<(u8, u8, [u8; 4], usize)> {
    let h = buf.get(..FRAME_HEADER)?;
    let len = FRAME_HEADER + (usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]));
    (buf.len() >= len).then_some((h[3], h[4], [h[5], h[6], h[7], h[8]], len))
}

/// A frame that needs an answer from the server: a SETTINGS that is not an acknowledgement (acknowledged)
/// and a HEADERS that ends its stream (answered `:status 200` with "ok"); appended to `out`.
pub fn h2_answer(ty: u8, flags: u8, id: [u8; 4], out: &mut Vec<u8>) {
    match ty {
        0x4 if flags & 0x1 == 0 => out.extend_from_slice(&SETTINGS_ACK),
        0x1 if flags & 0x1 != 0 => {
            out.extend_from_slice(&[0, 0, 1, 1, 4]); // HEADERS, END_HEADERS
            out.extend_from_slice(&id);
            out.push(0x88); // :status 200 (static index 8)
            out.extend_from_slice(&[0, 0, 2, 0, 1]); // DATA, END_STREAM
            out.extend_from_slice(&id);
            out.extend_from_slice(b"ok");
        }
        _ => {}
    }
}
