//! The server's frames, dispatched onto the connection's state: responses' headers and data, resets,
//! settings, pings, GOAWAY and window updates, each checked as RFC 9113 asks.

use std::time::Instant;

use super::wire::*;
use super::{push_data, Failure, Fault, State};

impl State {
    pub(super) fn frame(&mut self, ty: u8, flags: u8, id: u32, payload: &[u8]) -> Result<(), ConnError> {
        if let Some((bid, _, _)) = &self.block {
            if ty != CONTINUATION || id != *bid {
                return Err(ConnError(PROTOCOL_ERROR, "a frame inside a header block".into()));
            }
        }
        let stream_frame = matches!(ty, DATA | HEADERS | PRIORITY | RST_STREAM | CONTINUATION);
        if stream_frame && id == 0 {
            return Err(ConnError(PROTOCOL_ERROR, format!("a frame of type {ty} on stream 0")));
        }
        match ty {
            DATA => self.data(flags, id, payload)?,
            HEADERS => {
                let mut block = unpad(flags, payload)?;
                if flags & PRIORITY_FLAG != 0 {
                    block = block.get(5..).ok_or_else(|| {
                        ConnError(FRAME_SIZE_ERROR, "a HEADERS frame too short for its priority".into())
                    })?;
                }
                let end = flags & END_STREAM != 0;
                if flags & END_HEADERS != 0 {
                    self.headers(id, block, end)?;
                } else {
                    self.block = Some((id, block.to_vec(), end));
                }
            }
            CONTINUATION => {
                let Some((_, buf, _)) = &mut self.block else {
                    return Err(ConnError(PROTOCOL_ERROR, "CONTINUATION without HEADERS".into()));
                };
                buf.extend_from_slice(payload);
                if buf.len() > MAX_HEADER_BLOCK {
                    return Err(ConnError(PROTOCOL_ERROR, "a response header block above 1 MiB".into()));
                }
                if flags & END_HEADERS != 0 {
                    let (id, buf, end) = self.block.take().expect("checked above");
                    self.headers(id, &buf, end)?;
                }
            }
            RST_STREAM => {
                if payload.len() != 4 {
                    return Err(ConnError(
                        FRAME_SIZE_ERROR,
                        "an RST_STREAM frame not 4 bytes long".into(),
                    ));
                }
                let code = u32_at(payload);
                let failure = Failure {
                    fault: Fault::Reset { code, remote: true },
                    unprocessed: code == REFUSED_STREAM,
                };
                self.finish(id, Err(failure));
            }
            SETTINGS => self.settings(flags, id, payload)?,
            PUSH_PROMISE => {
                return Err(ConnError(
                    PROTOCOL_ERROR,
                    "PUSH_PROMISE, though knee disabled push".into(),
                ))
            }
            PING => {
                if id != 0 {
                    return Err(ConnError(PROTOCOL_ERROR, "PING on a stream".into()));
                }
                if payload.len() != 8 {
                    return Err(ConnError(FRAME_SIZE_ERROR, "a PING frame not 8 bytes long".into()));
                }
                if flags & ACK == 0 {
                    frame_head(&mut self.out, 8, PING, ACK, 0);
                    self.out.extend_from_slice(payload);
                }
            }
            GOAWAY => {
                if id != 0 {
                    return Err(ConnError(PROTOCOL_ERROR, "GOAWAY on a stream".into()));
                }
                if payload.len() < 8 {
                    return Err(ConnError(
                        FRAME_SIZE_ERROR,
                        "a GOAWAY frame shorter than 8 bytes".into(),
                    ));
                }
                let last = u32_at(payload) & LAST_ID;
                let code = u32_at(&payload[4..]);
                self.goaway = Some((last, code));
                self.closing = true; // closed by knee once its streams are done, if not by the server
                let above: Vec<u32> = self
                    .streams
                    .iter()
                    .filter(|(sid, st)| **sid > last && st.end.is_none())
                    .map(|(sid, _)| *sid)
                    .collect();
                for sid in above {
                    let failure = Failure {
                        fault: Fault::GoAway { code },
                        unprocessed: true,
                    };
                    self.finish(sid, Err(failure));
                }
                self.wake_waiting();
            }
            WINDOW_UPDATE => {
                if payload.len() != 4 {
                    return Err(ConnError(
                        FRAME_SIZE_ERROR,
                        "a WINDOW_UPDATE frame not 4 bytes long".into(),
                    ));
                }
                let inc = i64::from(u32_at(payload) & LAST_ID);
                if id == 0 {
                    if inc == 0 {
                        return Err(ConnError(PROTOCOL_ERROR, "a WINDOW_UPDATE of 0".into()));
                    }
                    self.send_window += inc;
                    if self.send_window > MAX_WINDOW {
                        return Err(ConnError(
                            FLOW_CONTROL_ERROR,
                            "the connection's window above 2^31 - 1".into(),
                        ));
                    }
                } else if let Some(st) = self.streams.get_mut(&id).filter(|st| st.end.is_none()) {
                    st.send_window += inc;
                    if inc == 0 {
                        self.stream_error(id, PROTOCOL_ERROR, "a WINDOW_UPDATE of 0");
                    } else if st.send_window > MAX_WINDOW {
                        self.stream_error(id, FLOW_CONTROL_ERROR, "a stream's window above 2^31 - 1");
                    }
                }
                self.push_bodies();
            }
            _ => {} // PRIORITY, and frame types knee does not know, are ignored (RFC 9113 §4.1)
        }
        Ok(())
    }

    fn data(&mut self, flags: u8, id: u32, payload: &[u8]) -> Result<(), ConnError> {
        // The whole frame counts against the windows, padding too; the credit goes back in bulk.
        let n = payload.len() as u32;
        self.unacked += n;
        if self.unacked >= CONNECTION_WINDOW / 2 {
            window_update(&mut self.out, 0, self.unacked);
            self.unacked = 0;
        }
        let data = unpad(flags, payload)?;
        let Some(st) = self.streams.get_mut(&id).filter(|st| st.end.is_none()) else {
            return Ok(()); // a stream knee reset (or one it never opened)
        };
        if st.status.is_none() {
            self.stream_error(id, PROTOCOL_ERROR, "DATA before the response's headers");
            return Ok(());
        }
        st.len += data.len() as u64;
        if let Some(g) = &mut st.grpc {
            g.feed(data);
        }
        st.body.put(data);
        if flags & END_STREAM != 0 {
            self.finish(id, Ok(()));
        } else {
            st.unacked += n;
            if st.unacked >= STREAM_WINDOW / 2 {
                window_update(&mut self.out, id, st.unacked);
                st.unacked = 0;
            }
        }
        Ok(())
    }

    fn headers(&mut self, id: u32, block: &[u8], end: bool) -> Result<(), ConnError> {
        // Decoded whatever became of the stream: the dynamic table must follow the server's.
        let mut fields = self
            .hpack
            .decode(block)
            .map_err(|e| ConnError(COMPRESSION_ERROR, format!("a response header block with {}", e.0)))?;
        let Some(st) = self.streams.get_mut(&id).filter(|st| st.end.is_none()) else {
            return Ok(());
        };
        let status = fields.status.take();
        // gRPC's status is the trailers' (or a trailers-only response's): a block that ends the stream. One in the
        // headers of a response whose body follows is not its status (gRPC's clients fail a call without trailers).
        if let (Some(g), true) = (&mut st.grpc, end) {
            g.read(fields);
        }
        if st.status.is_none() {
            match status {
                None => {
                    self.stream_error(id, PROTOCOL_ERROR, "a response without :status");
                    return Ok(());
                }
                Some(101) => {
                    self.stream_error(id, PROTOCOL_ERROR, "a 101 response, which HTTP/2 forbids");
                    return Ok(());
                }
                Some(s) if s < 200 => {
                    if end {
                        self.stream_error(id, PROTOCOL_ERROR, "an informational response that ends the stream");
                    }
                    return Ok(()); // 1xx: the response follows
                }
                Some(s) => {
                    st.status = Some(s);
                    st.headers_at = Some(Instant::now());
                }
            }
        }
        if end {
            self.finish(id, Ok(()));
        }
        Ok(())
    }

    fn settings(&mut self, flags: u8, id: u32, payload: &[u8]) -> Result<(), ConnError> {
        if id != 0 {
            return Err(ConnError(PROTOCOL_ERROR, "SETTINGS on a stream".into()));
        }
        if flags & ACK != 0 {
            return Ok(());
        }
        if !payload.len().is_multiple_of(6) {
            return Err(ConnError(
                FRAME_SIZE_ERROR,
                "a SETTINGS frame not a multiple of 6 bytes".into(),
            ));
        }
        for s in payload.chunks(6) {
            let value = u32_at(&s[2..]);
            match u16::from_be_bytes([s[0], s[1]]) {
                0x3 => {
                    self.max_streams = value as usize;
                    self.wake_waiting();
                }
                0x4 => {
                    let value = i64::from(value);
                    if value > MAX_WINDOW {
                        return Err(ConnError(FLOW_CONTROL_ERROR, "an initial window above 2^31 - 1".into()));
                    }
                    let delta = value - self.initial_send_window;
                    self.initial_send_window = value;
                    for st in self.streams.values_mut() {
                        st.send_window += delta;
                        if st.send_window > MAX_WINDOW {
                            return Err(ConnError(FLOW_CONTROL_ERROR, "a stream's window above 2^31 - 1".into()));
                        }
                    }
                }
                0x5 => {
                    if !(MAX_FRAME as u32..1 << 24).contains(&value) {
                        return Err(ConnError(PROTOCOL_ERROR, format!("a maximum frame size of {value}")));
                    }
                    self.max_frame = value as usize;
                }
                _ => {}
            }
        }
        frame_head(&mut self.out, 0, SETTINGS, ACK, 0);
        self.settled = true;
        self.push_bodies();
        Ok(())
    }

    /// Queue the request bodies the windows now allow.
    fn push_bodies(&mut self) {
        let State {
            out,
            send_window,
            max_frame,
            streams,
            ..
        } = self;
        for (id, st) in streams.iter_mut() {
            if st.pending.is_some() {
                push_data(out, send_window, *max_frame, *id, st);
            }
        }
    }
}
