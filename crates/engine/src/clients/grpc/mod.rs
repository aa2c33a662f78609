//! gRPC calls over knee's own HTTP/2 client: an http group with `grpc` (`GrpcSpec`). A call is a POST of the
//! method's path with `content-type: application/grpc` and `te: trailers`; its body is the group's message,
//! JSON converted to protobuf with the method's input descriptor (once for a fixed message, per call for a
//! templated one), in gRPC's framing (a flag byte and a 4-byte length before each message), `stream_messages`
//! times. The response's messages are counted as they come (`conn::GrpcRead`); the call's outcome is its
//! `grpc-status`, from the trailers or a trailers-only response: OK succeeds (if `expect_message` matches the
//! JSON of its messages), any other code fails as `grpc_status` with the code's name and the server's message.
//!
//! Descriptors come compiled (a FileDescriptorSet): `compile` turns .proto files into one with protox (no
//! protoc), `describe` finds a method in one: what knee's Python side calls before any load.

use std::path::{Path, PathBuf};
use std::time::Instant;

use base64::Engine as _;
use bytes::Bytes;
use prost::Message as _;
use prost_reflect::prost_types::FileDescriptorSet;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, MethodDescriptor};
use regex::bytes::Regex;

use super::http2::{reason_phrase, Answer, Link};

mod reflect;

use crate::class::ErrorClass;
use crate::error::{EngineError, SpecError};
use crate::outcome::{Detail, OpReport, Outcome, Traffic};
use crate::spec::{line_regex, GrpcSpec};
pub use reflect::reflect;

/// A group's gRPC side, prepared once: the method's message types and the response check.
pub(crate) struct GrpcPrep {
    input: MessageDescriptor,
    output: MessageDescriptor,
    stream_messages: u64,
    /// The pause before each message after the first (None: they go out with the call's HEADERS).
    interval: Option<std::time::Duration>,
    expect: Option<Regex>,
}

/// The status codes' names (grpc/doc/statuscodes.md), by code.
const CODES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// A status code's name ("code 42" for one gRPC does not define).
pub fn code_name(code: u32) -> String {
    CODES
        .get(code as usize)
        .map_or_else(|| format!("code {code}"), |n| (*n).to_string())
}

impl GrpcPrep {
    pub fn new(spec: &GrpcSpec, key: &str) -> Result<GrpcPrep, EngineError> {
        let bad = |why: String| EngineError::Spec(SpecError(format!("{key}.grpc.{why}")));
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&spec.descriptors)
            .map_err(|e| bad(format!("descriptors is not base64 ({e})")))?;
        let m = method(&bytes, &spec.method).map_err(|why| bad(format!("method: {why}")))?;
        let expect = spec
            .expect_message
            .as_deref()
            .map(|p| line_regex(p).map_err(|e| bad(format!("expect_message {p:?}: {e}"))))
            .transpose()?;
        Ok(GrpcPrep {
            input: m.input(),
            output: m.output(),
            stream_messages: spec.stream_messages,
            interval: (spec.stream_interval_ms > 0).then(|| std::time::Duration::from_millis(spec.stream_interval_ms)),
            expect,
        })
    }

    /// A call's body: `json`, the input message, as protobuf in gRPC's framing, `stream_messages` times.
    pub fn body(&self, json: &[u8]) -> Result<Bytes, String> {
        let one = encode(&self.input, json)?;
        let mut out = Vec::with_capacity((one.len() + 5) * self.stream_messages as usize);
        for _ in 0..self.stream_messages {
            frame(&mut out, &one);
        }
        Ok(Bytes::from(out))
    }

    /// The call's outcome from its answer (`body`: the response's bytes, kept when `expect_message` needs them;
    /// `sent`: the messages and bytes it sent), its figures: time to the first response message (to the headers when none came),
    /// messages and bytes each way.
    pub fn judge(&self, answer: &Answer, sent_at: Instant, sent: (u64, u64), body: &[u8], d: &mut Detail) -> OpReport {
        let g = answer.grpc.as_deref();
        let first = g.and_then(|g| g.first_at).unwrap_or(answer.headers_at);
        let outcome = if answer.status != 200 {
            let (status, reason) = (answer.status, reason_phrase(answer.status));
            d.clear()
                .put(format_args!("HTTP/2 {status} {reason} (not a gRPC response)"))
                .fix();
            Outcome::Fail(ErrorClass::Status)
        } else {
            match g.and_then(|g| g.status) {
                None => {
                    d.clear().put(format_args!("a gRPC response without grpc-status"));
                    Outcome::Fail(ErrorClass::Protocol)
                }
                Some(0) => self.check(body, d),
                Some(code) => {
                    d.clear().put(format_args!("{}", code_name(code))).fix();
                    if let Some(m) = g.and_then(|g| g.message.as_deref()).filter(|m| !m.is_empty()) {
                        d.put(format_args!(": {}", percent_decoded(m)));
                    }
                    Outcome::Fail(ErrorClass::GrpcStatus)
                }
            }
        };
        OpReport {
            outcome,
            ttfb: Some(first.saturating_duration_since(sent_at)),
            bytes: Traffic {
                sent: sent.1,
                received: answer.len,
                payload: answer.len,
                messages_sent: sent.0,
                messages_received: g.map_or(0, |g| g.messages),
            },
            ..OpReport::of(Outcome::Ok)
        }
    }

    /// Its messages are spaced in time (`stream_interval_ms`): the call opens with the first.
    pub fn spaced(&self) -> bool {
        self.interval.is_some()
    }

    /// The first of `body`'s messages (all alike, `body`'s `stream_messages` framed copies).
    pub fn first_of(&self, body: &Bytes) -> Bytes {
        body.slice(..body.len() / self.stream_messages as usize)
    }

    /// Send the rest of `body`'s messages on stream `id`, `interval` apart; stop when the stream has ended (the
    /// server answered early, or it failed: the answer says which, and how much went).
    pub async fn send_rest(&self, link: &Link, id: u32, body: &Bytes) {
        let one = self.first_of(body);
        for i in 1..self.stream_messages {
            // the pause, or the stream's end if the server ends it first (a call it refused at once is not held
            // for the pause)
            tokio::select! {
                _ = tokio::time::sleep(self.interval.unwrap_or_default()) => {}
                _ = std::future::poll_fn(|cx| link.poll_ended(cx, id)) => return,
            }
            if !link.send(id, &one, i + 1 == self.stream_messages) {
                return;
            }
        }
    }

    /// A body check needs the response's bytes kept.
    pub fn keeps_body(&self) -> bool {
        self.expect.is_some()
    }

    /// `expect_message` against the JSON of the response's messages, one per line.
    fn check(&self, body: &[u8], d: &mut Detail) -> Outcome {
        let Some(re) = &self.expect else { return Outcome::Ok };
        let mut json = Vec::new();
        for m in messages(body) {
            match DynamicMessage::decode(self.output.clone(), m) {
                Ok(msg) => json.extend(serde_json::to_vec(&msg).unwrap_or_default()),
                Err(e) => {
                    d.clear().put(format_args!(
                        "a response message that is not a {} ({e})",
                        self.output.full_name()
                    ));
                    return Outcome::Fail(ErrorClass::Body);
                }
            }
            json.push(b'\n');
        }
        if re.is_match(&json) {
            return Outcome::Ok;
        }
        d.clear()
            .put(format_args!("response does not match expect_message"))
            .fix()
            .quoted(&json, 120);
        Outcome::Fail(ErrorClass::Body)
    }
}

/// `message` appended to `out` in gRPC's framing: not compressed, its 4-byte length, the message.
fn frame(out: &mut Vec<u8>, message: &[u8]) {
    out.push(0);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
}

/// The messages of a body in gRPC's framing, in order (a last one cut short left out).
fn messages(body: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = body;
    std::iter::from_fn(move || {
        let len = u32::from_be_bytes(rest.get(1..5)?.try_into().ok()?) as usize;
        let m = rest.get(5..5 + len)?;
        rest = &rest[5 + len..];
        Some(m)
    })
}

/// `json` as a message of type `desc`, encoded; Err: why it is not one (the field, the type).
fn encode(desc: &MessageDescriptor, json: &[u8]) -> Result<Vec<u8>, String> {
    let mut de = serde_json::Deserializer::from_slice(json);
    let msg = DynamicMessage::deserialize(desc.clone(), &mut de)
        .and_then(|m| de.end().map(|()| m))
        .map_err(|e| format!("the message is not a {} in JSON: {e}", desc.full_name()))?;
    Ok(msg.encode_to_vec())
}

/// `grpc-message`'s percent-encoding undone (gRPC's own: %XX for bytes outside printable ASCII, and %).
fn percent_decoded(m: &[u8]) -> String {
    let mut out = Vec::with_capacity(m.len());
    let mut i = 0;
    while i < m.len() {
        let hex = m.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (m[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The method `name` (`package.Service/Method`, or with a dot for the slash) in a FileDescriptorSet's bytes.
pub fn method(descriptors: &[u8], name: &str) -> Result<MethodDescriptor, String> {
    let set = FileDescriptorSet::decode(descriptors).map_err(|e| format!("the descriptors do not decode ({e})"))?;
    if let Some(f) = set.file.iter().find(|f| f.syntax() == "editions") {
        return Err(editions(f.name()));
    }
    // prost-reflect panics on some descriptors it cannot read (it did on editions' before the check above): one
    // sentence, never a crash
    let pool = std::panic::catch_unwind(|| DescriptorPool::decode(descriptors))
        .map_err(|_| "the descriptors cannot be read by knee's protobuf reader (prost-reflect)".to_string())?
        .map_err(|e| format!("the descriptors do not load ({e})"))?;
    let name = name.trim_start_matches('/');
    let (service, method) = name
        .rsplit_once('/')
        .or_else(|| name.rsplit_once('.'))
        .ok_or_else(|| format!("{name:?} is not package.Service/Method"))?;
    let Some(s) = pool.get_service_by_name(service) else {
        let known: Vec<String> = pool.services().map(|s| s.full_name().to_string()).collect();
        return Err(format!(
            "no service {service:?} in the descriptors (they hold: {})",
            if known.is_empty() {
                "no service".to_string()
            } else {
                known.join(", ")
            }
        ));
    };
    let found = s.methods().find(|m| m.name() == method);
    found.ok_or_else(|| {
        let known: Vec<String> = s.methods().map(|m| m.name().to_string()).collect();
        format!("{service} has no method {method:?} (it has: {})", known.join(", "))
    })
}

/// What knee's Python side needs of a method: its message types and whether each side streams.
#[derive(Debug, PartialEq, Eq)]
pub struct MethodInfo {
    /// The method's full path, `/package.Service/Method`.
    pub path: String,
    pub input: String,
    pub output: String,
    pub client_streaming: bool,
    pub server_streaming: bool,
}

/// Method `name` in a FileDescriptorSet's bytes, with `message` (JSON) checked against its input type.
pub fn describe(descriptors: &[u8], name: &str, message: Option<&str>) -> Result<MethodInfo, String> {
    let m = method(descriptors, name)?;
    if let Some(json) = message {
        encode(&m.input(), json.as_bytes())?;
    }
    Ok(MethodInfo {
        path: format!("/{}/{}", m.parent_service().full_name(), m.name()),
        input: m.input().full_name().to_string(),
        output: m.output().full_name().to_string(),
        client_streaming: m.is_client_streaming(),
        server_streaming: m.is_server_streaming(),
    })
}

/// Compile .proto `files` (with their imports) into a FileDescriptorSet's bytes, without protoc. `includes`:
/// where imports are looked for, then the directory of each file that is under none of them.
pub fn compile(files: &[String], includes: &[String]) -> Result<Vec<u8>, String> {
    let mut dirs: Vec<PathBuf> = includes.iter().map(PathBuf::from).collect();
    for f in files {
        // a file under none of the include directories is found in its own (as protoc needs -I for it)
        if dirs.iter().any(|d| Path::new(f).starts_with(d)) {
            continue;
        }
        let parent = Path::new(f).parent().filter(|p| !p.as_os_str().is_empty());
        let dir = parent.map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    let mut c = protox::Compiler::new(&dirs).map_err(|e| format!("{e:?}"))?;
    c.include_imports(true);
    c.open_files(files).map_err(|e| {
        let why = format!("{e:?}");
        match e.file() {
            Some(f) if why.ends_with("but found 'edition'") => editions(f),
            _ => why,
        }
    })?;
    Ok(c.file_descriptor_set().encode_to_vec())
}

/// Why a file of protobuf editions cannot be read.
fn editions(file: &str) -> String {
    format!(
        "{file} is written in protobuf editions (edition = \"2023\"), which knee's reader does not read yet; \
         give it a proto3 copy (syntax = \"proto3\"; edition 2023 with IMPLICIT presence is proto3's wire format)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROTO: &str = r#"syntax = "proto3";
package knee.test;
service Greeter {
  rpc SayHello (HelloRequest) returns (HelloReply);
  rpc Chat (stream HelloRequest) returns (stream HelloReply);
}
message HelloRequest { string name = 1; int32 times = 2; }
message HelloReply { string message = 1; }
"#;

    fn compiled() -> Vec<u8> {
        let dir = std::env::temp_dir().join(format!("knee-grpc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("hello.proto");
        std::fs::write(&f, PROTO).unwrap();
        compile(&[f.to_string_lossy().into_owned()], &[]).unwrap()
    }

    #[test]
    fn a_method_is_found_and_its_json_message_encoded_in_grpc_s_framing() {
        let d = compiled();
        let info = describe(&d, "knee.test.Greeter/Chat", Some(r#"{"name": "x"}"#)).unwrap();
        assert_eq!(info.path, "/knee.test.Greeter/Chat");
        assert_eq!((info.client_streaming, info.server_streaming), (true, true));
        assert_eq!(info.input, "knee.test.HelloRequest");
        let spec = GrpcSpec {
            descriptors: base64::engine::general_purpose::STANDARD.encode(&d),
            method: "knee.test.Greeter.SayHello".into(),
            stream_messages: 2,
            stream_interval_ms: 0,
            expect_message: None,
        };
        let p = GrpcPrep::new(&spec, "groups.g").unwrap();
        // field 1 (string "ab"): 0x0a 0x02 'a' 'b'; field 2 (varint 3): 0x10 0x03; twice, each framed
        let one = [0, 0, 0, 0, 6, 0x0a, 2, b'a', b'b', 0x10, 3];
        assert_eq!(
            &p.body(br#"{"name": "ab", "times": 3}"#).unwrap()[..],
            [one, one].concat()
        );
        let err = p.body(br#"{"nam": "ab"}"#).unwrap_err();
        assert!(
            err.starts_with("the message is not a knee.test.HelloRequest in JSON: "),
            "{err}"
        );
        assert!(err.contains("nam"), "{err}");
        assert!(p.body(br#"{"times": "many"}"#).is_err());
        assert!(p.body(br#"{"name": "a"} x"#).is_err());
    }

    #[test]
    fn a_method_or_service_that_is_not_there_names_what_is() {
        let d = compiled();
        let e = describe(&d, "knee.test.Greeter/Bye", None).unwrap_err();
        assert_eq!(e, "knee.test.Greeter has no method \"Bye\" (it has: SayHello, Chat)");
        let e = describe(&d, "knee.Greeter/SayHello", None).unwrap_err();
        assert_eq!(
            e,
            "no service \"knee.Greeter\" in the descriptors (they hold: knee.test.Greeter)"
        );
        assert!(describe(&d, "Greeter", None).is_err());
    }

    #[test]
    fn a_proto_that_does_not_compile_says_where() {
        let dir = std::env::temp_dir().join(format!("knee-grpc-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("bad.proto");
        std::fs::write(&f, "syntax = \"proto3\";\nmessage A {\n  strin name = 1;\n}\n").unwrap();
        let e = compile(&[f.to_string_lossy().into_owned()], &[]).unwrap_err();
        assert!(e.starts_with("bad.proto:3:"), "{e}");
        // editions: one sentence from the compiler, and from the reader of a set protoc compiled
        let f = dir.join("ed.proto");
        std::fs::write(&f, "edition = \"2023\";\nmessage A { string name = 1; }\n").unwrap();
        let e = compile(&[f.to_string_lossy().into_owned()], &[]).unwrap_err();
        assert!(e.starts_with("ed.proto is written in protobuf editions"), "{e}");
        let mut set = FileDescriptorSet::decode(&compiled()[..]).unwrap();
        set.file[0].syntax = Some("editions".into());
        let e = method(&set.encode_to_vec(), "knee.test.Greeter/SayHello").unwrap_err();
        assert!(e.starts_with("hello.proto is written in protobuf editions"), "{e}");
    }

    #[test]
    fn status_names_and_messages_read_as_grpc_writes_them() {
        assert_eq!(code_name(8), "RESOURCE_EXHAUSTED");
        assert_eq!(code_name(99), "code 99");
        assert_eq!(percent_decoded(b"too many: 4%25 %E2%9C%93"), "too many: 4% \u{2713}");
        assert_eq!(percent_decoded(b"50%"), "50%");
    }
}
