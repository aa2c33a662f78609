//! A shard's data sources (`data`): rows a group's templates read, one per operation (docs/engine-spec.md).

use serde::{Deserialize, Serialize};

use crate::data::Format;
use crate::error::SpecError;

/// In which order a source's rows are handed out.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// Row after row, from the first again after the last (never runs out).
    #[default]
    Circular,
    /// Row after row, each once; then `on_exhausted`.
    Queue,
    /// A row picked at random (uniformly, seeded) for every operation (never runs out).
    Random,
    /// Every row once in a seeded random order; then `on_exhausted`.
    Shuffle,
}

/// What a `queue` or `shuffle` source does when every row has been handed out.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum OnExhausted {
    /// The groups that read it stop (operations in flight end as usual); the result says so.
    Stop,
    /// The client that found it empty stops; the others go on while they have rows.
    StopClient,
    /// Start again from the first row (of the same order).
    Recycle,
}

/// Whose rows: the whole shard's (`run`: every client takes the next one), or each client's own walk.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    #[default]
    Run,
    /// Client `c` of a group of `C` walks from row `c × rows / C` (a queue: its own slice of the rows).
    Client,
}

/// One source of rows.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DataSpec {
    /// Templates read it as `${NAME.COLUMN}`.
    pub name: String,
    /// The file (read once per process), or …
    pub file: Option<String>,
    /// … its text, given inline (a cluster's shard gets its part this way).
    pub text: Option<String>,
    /// csv, tsv or jsonl; by default what the file's name says.
    pub format: Option<Format>,
    #[serde(default)]
    pub order: Order,
    /// Default: `stop` for queue and shuffle (circular and random never run out).
    pub on_exhausted: Option<OnExhausted>,
    #[serde(default)]
    pub scope: Scope,
    /// The positions this shard may use, `[start, end)` ranges in the order's sequence (the rows, or their
    /// seeded shuffle); absent: all of them. A sweep's next step, or another machine, gets other ranges.
    pub ranges: Option<Vec<(u64, u64)>>,
}

/// Names a template reads that a data source may not take.
pub const RESERVED: [&str; 6] = ["client", "iteration", "uuid", "now_ms", "random_int", "random_string"];

impl DataSpec {
    pub fn format(&self) -> Option<Format> {
        self.format.or_else(|| self.file.as_deref().and_then(Format::of_path))
    }

    pub fn on_exhausted(&self) -> OnExhausted {
        self.on_exhausted.unwrap_or(match self.order {
            Order::Queue | Order::Shuffle => OnExhausted::Stop,
            Order::Circular | Order::Random => OnExhausted::Recycle,
        })
    }

    pub(super) fn validate(&self, key: &str) -> Result<(), SpecError> {
        let ok_name = self
            .name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && self.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok_name {
            return Err(SpecError::new(format!(
                "{key}.name {:?} is not a name templates can use; use letters, digits and _, e.g. \"users\"",
                self.name
            )));
        }
        if RESERVED.contains(&self.name.as_str()) {
            return Err(SpecError::new(format!(
                "{key}.name {:?} is a name templates use for themselves; call the data something else",
                self.name
            )));
        }
        match (&self.file, &self.text) {
            (Some(_), Some(_)) => {
                return Err(SpecError::new(format!("{key} has both file and text; give only one")));
            }
            (None, None) => {
                return Err(SpecError::new(format!(
                    "{key} has neither file nor text; give the data file"
                )));
            }
            _ => {}
        }
        if self.format().is_none() {
            return Err(SpecError::new(format!(
                "{key}.format is not given and {:?} does not say it; set format = \"csv\", \"tsv\" or \"jsonl\"",
                self.file.as_deref().unwrap_or("the text")
            )));
        }
        if let (Order::Circular | Order::Random, Some(e)) = (self.order, self.on_exhausted) {
            if e != OnExhausted::Recycle {
                return Err(SpecError::new(format!(
                    "{key}.on_exhausted {e:?} applies to queue and shuffle orders only ({:?} never runs out); drop it",
                    self.order
                )));
            }
        }
        for (i, (a, b)) in self.ranges.iter().flatten().enumerate() {
            if a >= b {
                return Err(SpecError::new(format!(
                    "{key}.ranges[{i}] [{a}, {b}] is empty; give [start, end) with start < end"
                )));
            }
        }
        Ok(())
    }
}
