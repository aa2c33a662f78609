//! The connection's state, driven frame by frame (no socket): windows, acknowledgements, errors, ends.

use super::wire::*;
use super::*;

#[test]
fn a_body_goes_as_the_windows_allow() {
    let link = Link::new();
    let waker = std::task::Waker::noop();
    let mut cx = Context::from_waker(waker);
    let body = Bytes::from(vec![7u8; 100_000]);
    let mut buf = BodyCheck::default();
    let Poll::Ready(Ok(id)) = link.poll_open(&mut cx, &[0x82], &body, &mut buf, Carries::Http) else {
        panic!("the stream opens")
    };
    let mut s = link.st.borrow_mut();
    // 65 535 bytes at first (both windows), in frames of at most 16 384.
    let sent = s.streams[&id].pending.as_ref().map(|(_, n)| *n);
    assert_eq!(sent, Some(65_535));
    s.out.clear();
    s.frame(WINDOW_UPDATE, 0, 0, &100_000u32.to_be_bytes()).ok().unwrap();
    assert!(s.out.is_empty(), "the stream's own window is still empty");
    s.frame(WINDOW_UPDATE, 0, id, &100_000u32.to_be_bytes()).ok().unwrap();
    assert!(s.streams[&id].pending.is_none());
    // Three DATA frames: 16 384, 16 384, 1 697 (END_STREAM on the last).
    let mut frames = Vec::new();
    let mut b = &s.out[..];
    while b.len() >= 9 {
        let len = usize::from(b[0]) << 16 | usize::from(b[1]) << 8 | usize::from(b[2]);
        frames.push((len, b[3], b[4]));
        b = &b[9 + len..];
    }
    assert_eq!(
        frames,
        [(16_384, DATA, 0), (16_384, DATA, 0), (1_697, DATA, END_STREAM)]
    );
}

#[test]
fn pings_and_settings_are_acknowledged_and_bad_frames_refused() {
    let link = Link::new();
    let mut s = link.st.borrow_mut();
    s.out.clear();
    // SETTINGS_MAX_CONCURRENT_STREAMS 5, SETTINGS_MAX_FRAME_SIZE 32 768.
    s.frame(SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 5, 0, 5, 0, 0, 0x80, 0])
        .ok()
        .unwrap();
    s.frame(PING, 0, 0, b"12345678").ok().unwrap();
    s.frame(PING, ACK, 0, b"abcdefgh").ok().unwrap(); // an acknowledgement is not answered
    assert_eq!((s.max_streams, s.max_frame, s.settled), (5, 32_768, true));
    let mut want = Vec::new();
    frame_head(&mut want, 0, SETTINGS, ACK, 0);
    frame_head(&mut want, 8, PING, ACK, 0);
    want.extend_from_slice(b"12345678");
    assert_eq!(s.out, want);
    assert!(
        s.frame(SETTINGS, 0, 0, &[0, 5, 0, 0, 0, 1]).is_err(),
        "a frame size below 16 384"
    );
    assert!(
        s.frame(SETTINGS, 0, 0, &[0, 4, 0x80, 0, 0, 0]).is_err(),
        "a window above 2^31 - 1"
    );
    assert!(s.frame(PUSH_PROMISE, END_HEADERS, 1, &[0, 0, 0, 2]).is_err());
    assert!(s.frame(DATA, 0, 0, b"x").is_err(), "DATA on stream 0");
    assert!(s.frame(RST_STREAM, 0, 1, &[0, 0]).is_err());
}

/// A stream opened on a fresh link (carrying an HTTP request, or a gRPC call), and the link's queued frames
/// cleared.
fn opened(link: &Link, carries: Carries) -> u32 {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut body = BodyCheck::default();
    let Poll::Ready(Ok(id)) = link.poll_open(&mut cx, &[0x82], &Bytes::new(), &mut body, carries) else {
        panic!("the stream opens")
    };
    link.st.borrow_mut().out.clear();
    id
}

fn answer(link: &Link, id: u32) -> Poll<Result<Answer, Failure>> {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    link.poll_answer(&mut cx, id, &mut BodyCheck::default())
}

#[test]
fn a_stream_the_server_breaks_is_reset_alone() {
    // A 101 (`:status` literal, not indexed), and a stream WINDOW_UPDATE of 0: each resets its stream
    // only (RST_STREAM PROTOCOL_ERROR), fails it as malformed, and leaves the connection usable.
    for (ty, flags, payload) in [
        (HEADERS, END_HEADERS, &[0x08, 0x03, b'1', b'0', b'1'][..]),
        (WINDOW_UPDATE, 0, &[0, 0, 0, 0][..]),
    ] {
        let link = Link::new();
        let id = opened(&link, Carries::Http);
        link.st.borrow_mut().frame(ty, flags, id, payload).ok().unwrap();
        let mut want = Vec::new();
        rst_stream(&mut want, id, PROTOCOL_ERROR);
        assert_eq!(link.st.borrow().out, want);
        match answer(&link, id) {
            Poll::Ready(Err(Failure {
                fault: Fault::Malformed(_),
                unprocessed: false,
            })) => {}
            other => panic!("{:?}", other.map(|r| r.map(|a| a.status))),
        }
        assert!(link.usable());
        assert_eq!(link.st.borrow().active, 0);
    }
}

#[test]
fn streams_whose_headers_never_left_are_unprocessed_when_the_connection_ends() {
    // Two streams; the driver wrote the preface and the first one's HEADERS only, then the server closed.
    let link = Link::new();
    let preface = link.st.borrow().out.len() as u64;
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut open = || match link.poll_open(
        &mut cx,
        &[0x82],
        &Bytes::new(),
        &mut BodyCheck::default(),
        Carries::Http,
    ) {
        Poll::Ready(Ok(id)) => id,
        _ => panic!("the stream opens"),
    };
    let (first, second) = (open(), open());
    let headers = 9 + 1;
    link.st.borrow_mut().end_all(Fault::Closed, preface + headers);
    assert!(matches!(
        answer(&link, first),
        Poll::Ready(Err(Failure { unprocessed: false, .. }))
    ));
    assert!(matches!(
        answer(&link, second),
        Poll::Ready(Err(Failure { unprocessed: true, .. }))
    ));
    // A graceful GOAWAY that covers every stream: no new streams, and knee closes it once they are done.
    let link = Link::new();
    let id = opened(&link, Carries::Http);
    link.st
        .borrow_mut()
        .frame(GOAWAY, 0, 0, &[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0])
        .ok()
        .unwrap();
    assert!(!link.usable() && link.st.borrow().closing);
    assert!(answer(&link, id).is_pending(), "its stream goes on");
}

/// gRPC's messages are counted by their prefixes however the DATA frames cut them: a prefix split across frames,
/// an empty message, several in one frame; a message cut off by the stream's end is not counted.
#[test]
fn grpc_messages_are_counted_across_any_cut_of_the_body() {
    let mut body = Vec::new();
    for m in [&b"abc"[..], b"", b"0123456789"] {
        body.push(0);
        body.extend((m.len() as u32).to_be_bytes());
        body.extend(m);
    }
    body.extend([0, 0, 0, 0, 9, b'x']); // the start of a fourth, never finished
    for cut in 1..body.len() {
        let mut g = super::GrpcRead::default();
        for chunk in body.chunks(cut) {
            g.feed(chunk);
        }
        assert_eq!(g.messages, 3, "chunks of {cut}");
        assert!(g.first_at.is_some());
    }
}

/// gRPC's status is read from the block that ends the stream: a `grpc-status: 0` in the headers of a response whose
/// DATA then ends it, without trailers, is no status (it was taken as OK); in trailers-only headers it is.
#[test]
fn grpc_status_comes_from_the_block_that_ends_the_stream() {
    // `:status 200` (indexed), then `grpc-status: 0` (a literal with a new name, not indexed).
    let mut block = vec![0x88, 0x00, 11];
    block.extend_from_slice(b"grpc-status");
    block.extend_from_slice(&[1, b'0']);
    for trailers_only in [false, true] {
        let link = Link::new();
        let id = opened(&link, Carries::Grpc);
        let mut s = link.st.borrow_mut();
        let flags = if trailers_only {
            END_HEADERS | END_STREAM
        } else {
            END_HEADERS
        };
        s.frame(HEADERS, flags, id, &block).ok().unwrap();
        if !trailers_only {
            s.frame(DATA, END_STREAM, id, &[0, 0, 0, 0, 0]).ok().unwrap();
        }
        drop(s);
        let Poll::Ready(Ok(a)) = answer(&link, id) else {
            panic!("the stream ended")
        };
        let status = a.grpc.and_then(|g| g.status);
        assert_eq!(status, trailers_only.then_some(0), "trailers only: {trailers_only}");
    }
}

/// A response that ends the stream before the request's body went whole: the answer says how much went (the
/// first window's 65 535 bytes of 100 000), what the operation counts as sent, and the rest is cancelled.
#[test]
fn an_early_answer_counts_the_body_that_went() {
    let link = Link::new();
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let body = Bytes::from(vec![7u8; 100_000]);
    let Poll::Ready(Ok(id)) = link.poll_open(&mut cx, &[0x82], &body, &mut BodyCheck::default(), Carries::Http) else {
        panic!("the stream opens")
    };
    link.st
        .borrow_mut()
        .frame(HEADERS, END_HEADERS | END_STREAM, id, &[0x88])
        .ok()
        .unwrap();
    let Poll::Ready(Ok(a)) = answer(&link, id) else {
        panic!("the stream ended")
    };
    assert_eq!((a.status, a.body_sent), (200, 65_535));
}

/// A stream cancelled before its response (a timeout, the run's end) gives back the body checks the client lent it,
/// with what they had read: the client's next response reuses their buffers instead of making them again.
#[test]
fn a_cancelled_stream_gives_back_the_clients_body_checks() {
    use crate::clients::bodycheck::Wants;
    let link = Link::new();
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut body = BodyCheck::default();
    body.start(Wants::quote(16));
    let Poll::Ready(Ok(id)) = link.poll_open(&mut cx, &[0x82], &Bytes::new(), &mut body, Carries::Http) else {
        panic!("the stream opens")
    };
    assert!(body.kept().is_empty());
    link.answering(id, b"the start");
    let back = link.cancel(id).expect("the stream was open");
    assert_eq!(back.kept(), b"the start");
    assert!(link.cancel(id).is_none(), "cancelled once");
}
