//! Error classes: every failed operation carries exactly one.

/// Why an operation failed. The names (`as_str`) are the keys of `failures` in the summary JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    ConnectRefused,
    ConnectTimeout,
    ConnectError,
    Tls,
    Reset,
    Closed,
    ReadError,
    WriteError,
    Protocol,
    Status,
    Body,
    Length,
    ExitCode,
    Signal,
    Spawn,
    Stdout,
    Stderr,
    File,
    /// A worker program reported the operation failed (its own class is in the message).
    Worker,
    /// A worker program exited (or was lost) while the operation ran.
    WorkerExit,
    /// HTTP/2: the server's GOAWAY ended the stream (its error code in the message).
    GoAway,
    /// HTTP/2: the stream was reset with RST_STREAM (its error code in the message).
    StreamReset,
    /// The request could not be made: a value filled into it cannot be sent (a space in a URL's path, a line
    /// break in a header); nothing was sent.
    Request,
    /// WebSocket: the server closed the connection with a close frame (its code and reason in the message).
    WsClose,
    /// gRPC: the call ended with a status other than OK (its code's name and the server's message in the message).
    GrpcStatus,
}

impl ErrorClass {
    /// Every class, in the order of their indices.
    pub const ALL: [ErrorClass; 25] = [
        ErrorClass::ConnectRefused,
        ErrorClass::ConnectTimeout,
        ErrorClass::ConnectError,
        ErrorClass::Tls,
        ErrorClass::Reset,
        ErrorClass::Closed,
        ErrorClass::ReadError,
        ErrorClass::WriteError,
        ErrorClass::Protocol,
        ErrorClass::Status,
        ErrorClass::Body,
        ErrorClass::Length,
        ErrorClass::ExitCode,
        ErrorClass::Signal,
        ErrorClass::Spawn,
        ErrorClass::Stdout,
        ErrorClass::Stderr,
        ErrorClass::File,
        ErrorClass::Worker,
        ErrorClass::WorkerExit,
        ErrorClass::GoAway,
        ErrorClass::StreamReset,
        ErrorClass::Request,
        ErrorClass::WsClose,
        ErrorClass::GrpcStatus,
    ];
    pub const COUNT: usize = Self::ALL.len();

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::ConnectRefused => "connect_refused",
            ErrorClass::ConnectTimeout => "connect_timeout",
            ErrorClass::ConnectError => "connect_error",
            ErrorClass::Tls => "tls",
            ErrorClass::Reset => "reset",
            ErrorClass::Closed => "closed",
            ErrorClass::ReadError => "read_error",
            ErrorClass::WriteError => "write_error",
            ErrorClass::Protocol => "protocol",
            ErrorClass::Status => "status",
            ErrorClass::Body => "body",
            ErrorClass::Length => "length",
            ErrorClass::ExitCode => "exit_code",
            ErrorClass::Signal => "signal",
            ErrorClass::Spawn => "spawn",
            ErrorClass::Stdout => "stdout",
            ErrorClass::Stderr => "stderr",
            ErrorClass::File => "file",
            ErrorClass::Worker => "worker",
            ErrorClass::WorkerExit => "worker_exit",
            ErrorClass::GoAway => "goaway",
            ErrorClass::StreamReset => "rst_stream",
            ErrorClass::Request => "request",
            ErrorClass::WsClose => "ws_close",
            ErrorClass::GrpcStatus => "grpc_status",
        }
    }

    pub fn from_name(name: &str) -> Option<ErrorClass> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
    }

    /// The class of an I/O error met while connecting.
    pub fn of_connect(e: &std::io::Error) -> ErrorClass {
        match e.kind() {
            std::io::ErrorKind::ConnectionRefused => ErrorClass::ConnectRefused,
            std::io::ErrorKind::TimedOut => ErrorClass::ConnectTimeout,
            _ => ErrorClass::ConnectError,
        }
    }

    /// The class of an I/O error met while reading (`write` = while writing).
    pub fn of_io(e: &std::io::Error, write: bool) -> ErrorClass {
        use std::io::ErrorKind as K;
        // A TLS alert may come with the first read (TLS 1.3: the server checks the client's
        // certificate after the client's side of the handshake is done).
        if crate::clients::rustls_error(e).is_some() {
            return ErrorClass::Tls;
        }
        match e.kind() {
            K::ConnectionReset | K::ConnectionAborted => ErrorClass::Reset,
            K::BrokenPipe => ErrorClass::WriteError,
            K::UnexpectedEof => ErrorClass::Closed,
            K::InvalidData => ErrorClass::Protocol,
            _ if write => ErrorClass::WriteError,
            _ => ErrorClass::ReadError,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_indices_match() {
        for (i, c) in ErrorClass::ALL.into_iter().enumerate() {
            assert_eq!(c.index(), i);
            assert_eq!(ErrorClass::from_name(c.as_str()), Some(c));
        }
    }
}
