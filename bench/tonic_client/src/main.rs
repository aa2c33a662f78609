//! `tonic-client PORT CLIENTS SECONDS`: CLIENTS tasks, each on a connection of its own, calling
//! helloworld.Greeter/SayHello one after another on 127.0.0.1:PORT for SECONDS; prints "SUCCEEDED FAILED".
//! The messages are prost derives and the call tonic's generic client (no code generated, no protoc).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::uri::PathAndQuery;
use tonic::client::Grpc;
use tonic::codec::ProstCodec;
use tonic::transport::Endpoint;

#[derive(Clone, PartialEq, prost::Message)]
struct HelloRequest {
    #[prost(string, tag = "1")]
    name: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct HelloReply {
    #[prost(string, tag = "1")]
    message: String,
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let port = &args[1];
    let clients: usize = args[2].parse().expect("CLIENTS");
    let seconds: f64 = args[3].parse().expect("SECONDS");
    let endpoint = Endpoint::from_shared(format!("http://127.0.0.1:{port}")).expect("URL");
    let mut channels = Vec::with_capacity(clients);
    for _ in 0..clients {
        channels.push(endpoint.connect().await.expect("connect"));
    }
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let tasks: Vec<_> = channels
        .into_iter()
        .map(|ch| {
            let (ok, failed) = (ok.clone(), failed.clone());
            tokio::spawn(async move {
                let mut grpc = Grpc::new(ch);
                let path = PathAndQuery::from_static("/helloworld.Greeter/SayHello");
                while Instant::now() < end {
                    if grpc.ready().await.is_err() {
                        failed.fetch_add(1, Relaxed);
                        continue;
                    }
                    let req = tonic::Request::new(HelloRequest { name: "tonic".into() });
                    let r = grpc
                        .unary::<HelloRequest, HelloReply, _>(req, path.clone(), ProstCodec::default())
                        .await;
                    match r {
                        Ok(_) => ok.fetch_add(1, Relaxed),
                        Err(_) => failed.fetch_add(1, Relaxed),
                    };
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("task");
    }
    println!("{} {}", ok.load(Relaxed), failed.load(Relaxed));
}
