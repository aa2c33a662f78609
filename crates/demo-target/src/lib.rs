//! knee's demo service: a real HTTP + TCP server whose capacity follows the Universal
//! Scalability Law, with the limits real services have (a worker pool, a listen backlog, a
//! connection limit, timeouts, hung requests, metastable overload), and optional login sessions
//! (a `[login]` endpoint handing out cookies that `session = true` paths require).
//!
//! With `n` requests in flight (counting the new one, at its arrival) a request of unit cost
//! waits `S(n) = (1 + σ(n−1) + κn(n−1)) / λ` seconds on a timer — it never burns CPU — so `N`
//! closed-loop clients with no think time get `X(N) = λN / (1 + σ(N−1) + κN(N−1))` requests/s,
//! which peaks at `N* = sqrt((1−σ)/κ)`.
//!
//! ```no_run
//! use knee_demo_target::{Config, Server};
//! let server = Server::start(Config::profile("srm-fast").unwrap()).unwrap();
//! println!("http://{}/ and tcp {}", server.http_addr(), server.tcp_addr());
//! println!("{}", server.stats_json());
//! server.stop();
//! server.wait(None);
//! ```

mod config;
mod error;
mod http;
mod profiles;
mod server;
mod state;
mod tcp;
mod timer;
mod variation;
mod workers;

pub use config::{Config, Login, PathCost, Recovery, RecoveryMode, TcpConfig};
pub use error::TargetError;
pub use profiles::{profiles, text as profile_text};
pub use server::Server;
