//! HTTP/2's wire: frame types, flags, error codes and the connection's constants (RFC 9113), and the
//! frames knee writes by hand.

use std::borrow::Cow;

// Frame types and flags (RFC 9113 §6).
pub(super) const DATA: u8 = 0x0;
pub(super) const HEADERS: u8 = 0x1;
pub(super) const PRIORITY: u8 = 0x2;
pub(super) const RST_STREAM: u8 = 0x3;
pub(super) const SETTINGS: u8 = 0x4;
pub(super) const PUSH_PROMISE: u8 = 0x5;
pub(super) const PING: u8 = 0x6;
pub(super) const GOAWAY: u8 = 0x7;
pub(super) const WINDOW_UPDATE: u8 = 0x8;
pub(super) const CONTINUATION: u8 = 0x9;
pub(super) const END_STREAM: u8 = 0x1;
pub(super) const ACK: u8 = 0x1;
pub(super) const END_HEADERS: u8 = 0x4;
pub(super) const PADDED: u8 = 0x8;
pub(super) const PRIORITY_FLAG: u8 = 0x20;

// Error codes (RFC 9113 §7).
pub(super) const NO_ERROR: u32 = 0x0;
pub(super) const PROTOCOL_ERROR: u32 = 0x1;
pub(super) const FLOW_CONTROL_ERROR: u32 = 0x3;
pub(super) const FRAME_SIZE_ERROR: u32 = 0x6;
pub(super) const REFUSED_STREAM: u32 = 0x7;
pub(super) const CANCEL: u32 = 0x8;
pub(super) const COMPRESSION_ERROR: u32 = 0x9;

pub(super) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Flow-control windows: large enough that a stream's window never limits a response on loopback (the
/// credit is given back when half of it is used), like h2load's defaults.
pub(super) const STREAM_WINDOW: u32 = 16 << 20;
pub(super) const CONNECTION_WINDOW: u32 = 1 << 30;
/// Every window starts at this (RFC 9113 §6.9.2), the largest one may reach is `MAX_WINDOW`.
pub(super) const DEFAULT_WINDOW: i64 = 65_535;
pub(super) const MAX_WINDOW: i64 = (1 << 31) - 1;
/// The largest frame knee accepts (SETTINGS_MAX_FRAME_SIZE left at its default) and sends at first.
pub(super) const MAX_FRAME: usize = 16_384;
/// The largest response header block knee takes (its CONTINUATION frames together).
pub(super) const MAX_HEADER_BLOCK: usize = 1 << 20;
pub(super) const READ_BUFFER: usize = 64 << 10;
/// The highest stream id: a connection that reached it takes no more streams.
pub(super) const LAST_ID: u32 = (1 << 31) - 1;

/// A connection error: its code, and why (for the streams' failures).
pub(super) struct ConnError(pub u32, pub String);

pub(super) fn frame_head(out: &mut Vec<u8>, len: usize, ty: u8, flags: u8, id: u32) {
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, ty, flags]);
    out.extend_from_slice(&id.to_be_bytes());
}

pub(super) fn window_update(out: &mut Vec<u8>, id: u32, increment: u32) {
    frame_head(out, 4, WINDOW_UPDATE, 0, id);
    out.extend_from_slice(&increment.to_be_bytes());
}

pub(super) fn rst_stream(out: &mut Vec<u8>, id: u32, code: u32) {
    frame_head(out, 4, RST_STREAM, 0, id);
    out.extend_from_slice(&code.to_be_bytes());
}

pub(super) fn u32_at(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// A frame's payload without its padding.
pub(super) fn unpad(flags: u8, payload: &[u8]) -> Result<&[u8], ConnError> {
    if flags & PADDED == 0 {
        return Ok(payload);
    }
    let (&pad, rest) = payload
        .split_first()
        .ok_or_else(|| ConnError(PROTOCOL_ERROR, "a padded frame without its pad length".into()))?;
    rest.len()
        .checked_sub(usize::from(pad))
        .map(|n| &rest[..n])
        .ok_or_else(|| ConnError(PROTOCOL_ERROR, "padding longer than its frame".into()))
}

/// An HTTP/2 error code's name (RFC 9113 §7).
pub(crate) fn code_name(code: u32) -> Cow<'static, str> {
    const NAMES: [&str; 14] = [
        "NO_ERROR",
        "PROTOCOL_ERROR",
        "INTERNAL_ERROR",
        "FLOW_CONTROL_ERROR",
        "SETTINGS_TIMEOUT",
        "STREAM_CLOSED",
        "FRAME_SIZE_ERROR",
        "REFUSED_STREAM",
        "CANCEL",
        "COMPRESSION_ERROR",
        "CONNECT_ERROR",
        "ENHANCE_YOUR_CALM",
        "INADEQUATE_SECURITY",
        "HTTP_1_1_REQUIRED",
    ];
    match NAMES.get(code as usize) {
        Some(n) => (*n).into(),
        None => format!("error code {code:#x}").into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_is_taken_off_and_checked() {
        assert_eq!(unpad(PADDED, &[2, b'a', b'b', 0, 0]).ok(), Some(&b"ab"[..]));
        assert_eq!(unpad(0, b"ab").ok(), Some(&b"ab"[..]));
        assert!(unpad(PADDED, &[3, b'a', 0]).is_err());
        assert!(unpad(PADDED, &[]).is_err());
        assert_eq!(code_name(7), "REFUSED_STREAM");
        assert_eq!(code_name(0x42), "error code 0x42");
    }
}
