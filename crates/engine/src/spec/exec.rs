//! The specs of groups that run programs: `exec` (a command per operation) and `worker` (long-lived programs).

use serde::{Deserialize, Serialize};

use super::check_regex;
use crate::error::SpecError;

/// Run a command (no shell).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExecSpec {
    pub argv: Vec<String>,
    #[serde(default)]
    pub env: Vec<(String, String)>,
    pub cwd: Option<String>,
    pub expect_stdout: Option<String>,
    pub expect_stderr: Option<String>,
    pub expect_file: Option<FileCheck>,
    /// Where an operation's payload size comes from: `"stdout"` (the bytes it wrote there) or a
    /// file path (`${client}`/`${iteration}` substituted). Default: the size of `expect_file`.
    pub bytes_from: Option<String>,
}

/// A long-lived client program speaking knee's worker protocol over stdin/stdout
/// (docs/worker-protocol.md): started before the run, a few processes hosting the clients.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WorkerSpec {
    pub argv: Vec<String>,
    #[serde(default)]
    pub env: Vec<(String, String)>,
    pub cwd: Option<String>,
    /// Processes for the group in all; 0 = one per engine thread. Fewer than the threads: the group's
    /// clients run on that many threads (a process belongs to one thread).
    #[serde(default)]
    pub processes: u64,
    /// Sent to every process in its start message.
    #[serde(default)]
    pub vars: std::collections::BTreeMap<String, String>,
    /// The operation's name, sent with every request (a fixed-work stage's).
    #[serde(default)]
    pub operation: String,
    /// How long a process may take to answer its start message.
    #[serde(default = "default_start_timeout_ms")]
    pub start_timeout_ms: u64,
    /// Data sources whose rows every operation takes and sends to the program (`data` on the run line).
    #[serde(default)]
    pub data: Vec<String>,
}

/// The command must leave a file of at least `min_size` bytes at `path`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FileCheck {
    pub path: String,
    #[serde(default)]
    pub min_size: u64,
}

fn default_start_timeout_ms() -> u64 {
    30_000
}

impl WorkerSpec {
    pub(super) fn validate(&self, key: &str) -> Result<(), SpecError> {
        if self.argv.is_empty() || self.argv[0].is_empty() {
            return Err(SpecError::new(format!(
                "{key}.argv must name the worker program, e.g. [\"java\", \"-cp\", \"w\", \"Worker\"] (got {:?})",
                self.argv
            )));
        }
        if self.start_timeout_ms == 0 {
            return Err(SpecError::new(format!(
                "{key}.start_timeout_ms must be at least 1 (got 0)"
            )));
        }
        Ok(())
    }
}

impl ExecSpec {
    pub(super) fn validate(&self, key: &str) -> Result<(), SpecError> {
        if self.argv.is_empty() || self.argv[0].is_empty() {
            return Err(SpecError::new(format!(
                "{key}.argv must name a command, e.g. [\"/bin/true\"] (got {:?})",
                self.argv
            )));
        }
        check_regex(&format!("{key}.expect_stdout"), &self.expect_stdout)?;
        check_regex(&format!("{key}.expect_stderr"), &self.expect_stderr)?;
        if let Some(f) = &self.expect_file {
            if f.path.is_empty() {
                return Err(SpecError::new(format!("{key}.expect_file.path must not be empty")));
            }
        }
        if self.bytes_from.as_deref() == Some("") {
            return Err(SpecError::new(format!(
                "{key}.bytes_from must be \"stdout\" or a file path (got an empty string)"
            )));
        }
        Ok(())
    }
}
