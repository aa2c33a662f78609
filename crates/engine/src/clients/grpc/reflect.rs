//! A service's descriptors from its server's reflection service (grpc/grpc's reflection protocol,
//! `grpc.reflection.v1.ServerReflection`, or `v1alpha` for servers that only have the older one): the file that
//! defines the service, then the files it imports that the server did not send with it, until none is missing.
//! Over knee's own HTTP/2 client, one connection, a call per round (each a bidirectional call whose requests all go
//! out at once). What `--reflect` uses before any load, in place of .proto files.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::poll_fn;
use std::time::Duration;

use bytes::Bytes;
use prost::Message;
use prost_reflect::prost_types::{FileDescriptorProto, FileDescriptorSet};

use crate::clients::bodycheck::{BodyCheck, Wants};
use crate::clients::http::HttpPrep;
use crate::clients::http2::{self, Carries, Link};
use crate::data::Feeders;
use crate::outcome::Detail;
use crate::spec::HttpSpec;

/// How long the whole lookup may take.
const LIMIT: Duration = Duration::from_secs(20);
/// Rounds of imports asked for before giving up (a chain of imports deeper than this is not a real service's).
const ROUNDS: usize = 32;

#[derive(Clone, PartialEq, Message)]
struct Request {
    #[prost(string, tag = "1")]
    host: String,
    #[prost(oneof = "Ask", tags = "3, 4")]
    ask: Option<Ask>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum Ask {
    #[prost(string, tag = "3")]
    FileByFilename(String),
    #[prost(string, tag = "4")]
    FileContainingSymbol(String),
}

#[derive(Clone, PartialEq, Message)]
struct Response {
    #[prost(oneof = "Answer", tags = "4, 7")]
    answer: Option<Answer>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum Answer {
    #[prost(message, tag = "4")]
    Files(Files),
    #[prost(message, tag = "7")]
    Error(Error),
}

#[derive(Clone, PartialEq, Message)]
struct Files {
    #[prost(bytes = "vec", repeated, tag = "1")]
    file_descriptor_proto: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, Message)]
struct Error {
    #[prost(int32, tag = "1")]
    error_code: i32,
    #[prost(string, tag = "2")]
    error_message: String,
}

/// The FileDescriptorSet (its bytes) of `service` and everything it imports, from the reflection service of the
/// server `spec` names (its URL's origin, TLS and headers; http2). Err: one sentence saying why not.
pub fn reflect(spec: &HttpSpec, service: &str) -> Result<Vec<u8>, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime to ask the server ({e})"))?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        // the group's metadata, as written: a value with a placeholder (one filled per operation) is left out
        let metadata: Vec<(String, String)> = spec
            .headers
            .iter()
            .filter(|(_, v)| !v.contains("${"))
            .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
            .collect();
        let bare = HttpSpec {
            headers: Vec::new(),
            ..spec.clone()
        };
        let p = HttpPrep::new(&bare, 1, &Feeders::default(), "reflect").map_err(|e| e.to_string())?;
        let drivers = RefCell::new(Vec::new());
        let mut d = Detail::default();
        let asked = tokio::time::timeout(LIMIT, async {
            let (link, _) = http2::open(&p, &drivers, None, &mut d)
                .await
                .map_err(|_| format!("cannot connect to ask its reflection service: {}", d.text))?;
            let url: hyper::Uri = spec.url.parse().map_err(|e| format!("url {:?}: {e}", spec.url))?;
            let authority = url.authority().map_or("", |a| a.as_str()).as_bytes();
            let files = lookup(&p, &link, (authority, &metadata), service).await;
            link.close();
            files
        })
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "its reflection service did not answer within {} s",
                LIMIT.as_secs()
            ))
        });
        for h in drivers.take() {
            let _ = tokio::time::timeout(Duration::from_millis(200), h).await;
        }
        let file: Vec<FileDescriptorProto> = asked?.into_values().collect();
        Ok(FileDescriptorSet { file }.encode_to_vec())
    })
}

/// Ask until every file the service's needs is here: v1 first, v1alpha if the server has only that one.
async fn lookup(
    p: &HttpPrep,
    link: &Link,
    to: (&[u8], &[(String, String)]),
    service: &str,
) -> Result<BTreeMap<String, FileDescriptorProto>, String> {
    let mut files = BTreeMap::new();
    let mut asks = vec![Ask::FileContainingSymbol(service.to_string())];
    let mut version = "v1";
    for _ in 0..ROUNDS {
        let answers = match call(p, link, to, version, &asks).await {
            Err(Unimplemented) if version == "v1" => {
                version = "v1alpha";
                continue;
            }
            Err(Unimplemented) => {
                return Err(
                    "the server has no reflection service (UNIMPLEMENTED); give the method's types with --proto \
                     or --protoset"
                        .into(),
                )
            }
            Ok(Err(why)) => return Err(why),
            Ok(Ok(answers)) => answers,
        };
        for a in answers {
            match a.answer {
                Some(Answer::Files(f)) => {
                    for bytes in f.file_descriptor_proto {
                        let fd = FileDescriptorProto::decode(&bytes[..])
                            .map_err(|e| format!("its reflection service sent a file that does not decode ({e})"))?;
                        files.entry(fd.name().to_string()).or_insert(fd);
                    }
                }
                Some(Answer::Error(e)) => {
                    return Err(format!(
                        "its reflection service answered {}: {}",
                        super::code_name(e.error_code as u32),
                        e.error_message
                    ))
                }
                None => {}
            }
        }
        let missing: Vec<String> = files
            .values()
            .flat_map(|f| f.dependency.iter())
            .filter(|d| !files.contains_key(*d))
            .cloned()
            .collect();
        if missing.is_empty() {
            return Ok(files);
        }
        let again: Vec<Ask> = missing.iter().cloned().map(Ask::FileByFilename).collect();
        if again == asks {
            return Err(format!(
                "its reflection service did not send {} (imported by the service's files)",
                missing.join(", ")
            ));
        }
        asks = again;
    }
    Err(format!(
        "its reflection service's files import more than {ROUNDS} levels deep"
    ))
}

/// The server has no reflection service of this version.
struct Unimplemented;

/// One call to the reflection service `version`: every request, then the answers.
async fn call(
    p: &HttpPrep,
    link: &Link,
    (authority, metadata): (&[u8], &[(String, String)]),
    version: &str,
    asks: &[Ask],
) -> Result<Result<Vec<Response>, String>, Unimplemented> {
    let path = format!("/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo");
    let mut fields = vec![("content-type", &b"application/grpc"[..]), ("te", b"trailers")];
    fields.extend(metadata.iter().map(|(n, v)| (n.as_str(), v.as_bytes())));
    let mut block = Vec::new();
    if let Err(why) = http2::encode(
        &mut block,
        p.dialer.tls.is_some(),
        "POST",
        authority,
        path.as_bytes(),
        fields.into_iter(),
        None,
    ) {
        return Ok(Err(why));
    }
    let mut body = Vec::new();
    for ask in asks {
        let one = Request {
            host: String::new(),
            ask: Some(ask.clone()),
        };
        super::frame(&mut body, &one.encode_to_vec());
    }
    let body = Bytes::from(body);
    let mut buf = BodyCheck::default();
    buf.start(Wants::quote(usize::MAX)); // the reflection's messages, whole
    let opened = poll_fn(|cx| link.poll_open(cx, &block, &body, &mut buf, Carries::Grpc)).await;
    let answer = match opened {
        Ok(id) => poll_fn(|cx| link.poll_answer(cx, id, &mut buf)).await,
        Err(f) => Err(f),
    };
    let answer = match answer {
        Ok(a) => a,
        Err(f) => {
            let mut d = Detail::default();
            http2::words(&f.fault, &mut d);
            return Ok(Err(format!("its reflection call failed: {}", d.text)));
        }
    };
    let status = answer.grpc.as_ref().and_then(|g| g.status);
    match (answer.status, status) {
        (200, Some(0)) => {}
        (200, Some(12)) => return Err(Unimplemented),
        (200, Some(code)) => return Ok(Err(format!("its reflection call ended {}", super::code_name(code)))),
        (s, _) => return Ok(Err(format!("its reflection call was answered HTTP {s}, not gRPC"))),
    }
    let mut out = Vec::new();
    for m in super::messages(buf.kept()) {
        match Response::decode(m) {
            Ok(r) => out.push(r),
            Err(e) => {
                return Ok(Err(format!(
                    "its reflection service sent an answer that does not decode ({e})"
                )))
            }
        }
    }
    Ok(Ok(out))
}
