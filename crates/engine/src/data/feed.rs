//! Handing rows out: every operation of a group that reads a source takes one row of it, in the source's
//! order, shared by the shard's clients (`scope = run`: one atomic cursor) or walked by each client alone
//! (`scope = client`). A `queue` or `shuffle` source hands each position of its ranges out once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::table::{self, Table};
use crate::error::SpecError;
use crate::rng::Rng;
use crate::spec::{DataSpec, OnExhausted, Order, Scope};

/// One source, ready for a shard.
pub(crate) struct Feeder {
    pub name: String,
    pub table: Arc<Table>,
    order: Order,
    on_exhausted: OnExhausted,
    scope: Scope,
    /// `[start, end)` position ranges this shard uses, and their total length.
    ranges: Vec<(u64, u64)>,
    total: u64,
    /// Shuffle: position → row.
    perm: Option<Vec<u32>>,
    /// Scope run: positions handed out (past `total` once it ran out).
    cursor: AtomicU64,
    /// Rows handed out (recycled ones counted again).
    taken: AtomicU64,
    exhausted_at: OnceLock<Instant>,
}

/// What a shard's sources did, in its result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DataUse {
    pub name: String,
    /// Rows in the file.
    pub rows: u64,
    /// Positions this shard could use (its ranges).
    pub available: u64,
    /// Rows handed out to operations (a recycled row counted each time).
    pub taken: u64,
    /// Scope run, queue and shuffle: positions used from the start of the ranges (the next step starts after them).
    pub used: u64,
    /// Seconds from the shard's start until the source first ran out (queue and shuffle that stop).
    pub exhausted_after_s: Option<f64>,
    /// Memory the rows take in this process.
    pub memory_bytes: u64,
}

impl DataUse {
    /// Pool another shard's use of the same source.
    pub fn absorb(&mut self, o: &DataUse) {
        // A shard whose part was empty (fewer positions left than shards) ran out at once and measured nothing: the
        // step ran out when a shard with rows did (or never), unless no shard had any.
        let with_rows = |d: &DataUse| d.exhausted_after_s.filter(|_| d.available > 0);
        let (a, b) = if self.available == 0 && o.available == 0 {
            (self.exhausted_after_s, o.exhausted_after_s)
        } else {
            (with_rows(self), with_rows(o))
        };
        self.available += o.available;
        self.taken += o.taken;
        self.used += o.used;
        self.rows = self.rows.max(o.rows);
        self.memory_bytes = self.memory_bytes.max(o.memory_bytes);
        self.exhausted_after_s = match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// Every source of a shard.
#[derive(Default)]
pub(crate) struct Feeders {
    pub list: Vec<Feeder>,
    seed: u64,
}

/// The operation could not take a row: its source ran out.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Exhausted {
    pub feeder: usize,
    /// The source's rule is `stop` (the group ends), not `stop_client`.
    pub stop_group: bool,
}

/// One client's own state for the sources: its generator, its current rows and (scope client) its walks.
pub(crate) struct ClientData {
    pub rng: Rng,
    /// The current operation's row of each source (`u64::MAX`: none taken).
    pub rows: Vec<u64>,
    /// Scope client: positions this client has walked, per source.
    walked: Vec<u64>,
}

impl ClientData {
    pub fn new(feeders: &Feeders, client: u64) -> ClientData {
        ClientData {
            rng: Rng::new(feeders.seed, client),
            rows: vec![u64::MAX; feeders.list.len()],
            walked: vec![0; feeders.list.len()],
        }
    }
}

/// What an operation draws on: its client's number and iteration, the shard's sources and its client's state.
pub(crate) struct Draw<'a> {
    /// The client's number in its group (`${client}`).
    pub client: u64,
    /// Its place among the group's clients in this shard, and their number: scope client's slices.
    pub index: u64,
    pub clients: u64,
    pub iteration: u64,
    pub feeders: &'a Feeders,
    pub state: &'a mut ClientData,
}

impl Draw<'_> {
    /// Take a row of each source in `uses` for this operation.
    pub fn take(&mut self, uses: &[usize]) -> Result<(), Exhausted> {
        for &f in uses {
            let row = self.feeders.list[f].take(f, self.index, self.clients, self.state)?;
            self.state.rows[f] = row;
        }
        Ok(())
    }

    /// Field `col` of source `f`'s current row.
    pub fn field(&self, f: usize, col: usize) -> &[u8] {
        self.feeders.list[f].table.field(self.state.rows[f], col)
    }

    /// The first source row this operation took, as "row N of NAME" (1-based), for a failure's message.
    pub fn which_row(&self, uses: &[usize]) -> Option<String> {
        uses.first()
            .map(|&f| format!("row {} of {}", self.state.rows[f] + 1, self.feeders.list[f].name))
    }
}

impl Feeders {
    /// Load (or find in this process's cache) every source of `specs`.
    pub fn new(specs: &[DataSpec], seed: u64) -> Result<Feeders, SpecError> {
        let mut list = Vec::with_capacity(specs.len());
        for (i, d) in specs.iter().enumerate() {
            let what = match &d.file {
                Some(f) => format!("data[{i}] {:?} ({f})", d.name),
                None => format!("data[{i}] {:?}", d.name),
            };
            let format = d.format().ok_or_else(|| SpecError::new(format!("{what}: no format")))?;
            let table = match (&d.file, &d.text) {
                (Some(f), _) => table::load(f, format, &what),
                (None, Some(t)) => Table::parse_owned(t.clone().into_bytes(), format, &what).map(Arc::new),
                (None, None) => Err(format!("{what} has neither file nor text")),
            }
            .map_err(SpecError::new)?;
            let rows = table.rows();
            // Ranges are cut at the last row: [used, u64::MAX) is "what earlier steps left".
            let ranges: Vec<(u64, u64)> = (d.ranges.clone().unwrap_or_else(|| vec![(0, rows)]).into_iter())
                .map(|(a, b)| (a.min(rows), b.min(rows)))
                .filter(|(a, b)| a < b)
                .collect();
            let perm = (d.order == Order::Shuffle).then(|| shuffled(rows, seed, &d.name));
            list.push(Feeder {
                name: d.name.clone(),
                order: d.order,
                on_exhausted: d.on_exhausted(),
                scope: d.scope,
                total: ranges.iter().map(|(a, b)| b - a).sum(),
                ranges,
                perm,
                table,
                cursor: AtomicU64::new(0),
                taken: AtomicU64::new(0),
                exhausted_at: OnceLock::new(),
            });
        }
        Ok(Feeders { list, seed })
    }

    pub fn index(&self, name: &str) -> Option<usize> {
        self.list.iter().position(|f| f.name == name)
    }

    /// What each source did, `start` being the shard's start.
    pub fn uses(&self, start: Instant) -> Vec<DataUse> {
        self.list
            .iter()
            .map(|f| DataUse {
                name: f.name.clone(),
                rows: f.table.rows(),
                available: f.total,
                taken: f.taken.load(Ordering::Relaxed),
                used: match (f.order, f.scope) {
                    (Order::Queue | Order::Shuffle, Scope::Run) => f.cursor.load(Ordering::Relaxed).min(f.total),
                    _ => 0,
                },
                exhausted_after_s: f
                    .exhausted_at
                    .get()
                    .map(|t| t.saturating_duration_since(start).as_secs_f64()),
                memory_bytes: f.table.memory_bytes(),
            })
            .collect()
    }
}

/// A seeded permutation of `rows` rows (Fisher–Yates); the same on every machine for the same seed and name.
fn shuffled(rows: u64, seed: u64, name: &str) -> Vec<u32> {
    let stream = name.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
    });
    let mut rng = Rng::new(seed, stream);
    let mut p: Vec<u32> = (0..rows as u32).collect();
    for i in (1..p.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        p.swap(i, j);
    }
    p
}

impl Feeder {
    /// The row at position `i` of this shard's ranges (`i < total`).
    fn row_at(&self, i: u64) -> u64 {
        let mut i = i;
        let mut pos = 0;
        for &(a, b) in &self.ranges {
            if i < b - a {
                pos = a + i;
                break;
            }
            i -= b - a;
        }
        match &self.perm {
            Some(p) => u64::from(p[pos as usize]),
            None => pos,
        }
    }

    fn ran_out(&self, f: usize) -> Exhausted {
        let _ = self.exhausted_at.set(Instant::now());
        Exhausted {
            feeder: f,
            stop_group: self.on_exhausted == OnExhausted::Stop,
        }
    }

    fn take(&self, f: usize, client: u64, clients: u64, state: &mut ClientData) -> Result<u64, Exhausted> {
        let total = self.total;
        if total == 0 {
            return Err(self.ran_out(f)); // earlier steps used every row
        }
        let once = matches!(self.order, Order::Queue | Order::Shuffle);
        let recycle = self.on_exhausted == OnExhausted::Recycle;
        let i = match (self.order, self.scope) {
            (Order::Random, _) => state.rng.below(total),
            (_, Scope::Run) => {
                let i = self.cursor.fetch_add(1, Ordering::Relaxed);
                if once && i >= total && !recycle {
                    return Err(self.ran_out(f));
                }
                i % total
            }
            (_, Scope::Client) => {
                // Client c's slice starts at c × total / clients; a queue's ends where the next client's starts.
                let c = u128::from(client % clients.max(1));
                let n = u128::from(clients.max(1));
                let from = (c * u128::from(total) / n) as u64;
                let to = ((c + 1) * u128::from(total) / n) as u64;
                let walked = state.walked[f];
                state.walked[f] += 1;
                if once {
                    let len = to - from;
                    if len == 0 || (walked >= len && !recycle) {
                        return Err(self.ran_out(f));
                    }
                    from + walked % len
                } else {
                    (from + walked) % total
                }
            }
        };
        self.taken.fetch_add(1, Ordering::Relaxed);
        Ok(self.row_at(i))
    }
}

#[cfg(test)]
mod tests {
    /// Shards' uses pooled: the earliest run-out of the shards that had rows; one whose part was empty (it ran out
    /// at once) does not make the step's (it made the step's 0 s: a step the others ran whole left out).
    #[test]
    fn an_empty_part_does_not_end_the_pooled_step() {
        let used = |available: u64, out: Option<f64>| super::DataUse {
            available,
            exhausted_after_s: out,
            ..super::DataUse::default()
        };
        for (parts, want) in [
            (vec![used(0, Some(0.0)), used(50, None)], None),
            (vec![used(50, None), used(0, Some(0.0))], None),
            (
                vec![used(0, Some(0.0)), used(50, Some(9.0)), used(40, Some(7.0))],
                Some(7.0),
            ),
            (vec![used(0, Some(0.1)), used(0, Some(0.0))], Some(0.0)),
        ] {
            let mut pooled = parts[0].clone();
            for p in &parts[1..] {
                pooled.absorb(p);
            }
            assert_eq!(pooled.exhausted_after_s, want, "{parts:?}");
        }
    }

    use super::*;

    fn feeders(order: &str, extra: &str, rows: usize) -> Feeders {
        let mut text = String::from("id\n");
        for r in 0..rows {
            text.push_str(&format!("{r}\n"));
        }
        let spec: DataSpec = serde_json::from_str(&format!(
            r#"{{"name": "u", "text": {}, "format": "csv", "order": "{order}"{extra}}}"#,
            serde_json::to_string(&text).unwrap()
        ))
        .unwrap();
        Feeders::new(&[spec], 3).unwrap()
    }

    fn walk(f: &Feeders, client: u64, clients: u64, n: usize) -> Vec<Result<u64, ()>> {
        let mut st = ClientData::new(f, client);
        (0..n)
            .map(|it| {
                let mut d = Draw {
                    client,
                    index: client,
                    clients,
                    iteration: it as u64,
                    feeders: f,
                    state: &mut st,
                };
                d.take(&[0]).map(|_| d.state.rows[0]).map_err(|_| ())
            })
            .collect()
    }

    #[test]
    fn a_queue_hands_each_row_out_once_then_runs_out() {
        let f = feeders("queue", "", 4);
        assert_eq!(walk(&f, 0, 1, 5), [Ok(0), Ok(1), Ok(2), Ok(3), Err(())]);
        assert_eq!(f.uses(Instant::now())[0].used, 4);
        assert!(f.uses(Instant::now())[0].exhausted_after_s.is_some());
        let f = feeders("queue", r#", "on_exhausted": "recycle""#, 2);
        assert_eq!(walk(&f, 0, 1, 3), [Ok(0), Ok(1), Ok(0)]);
        let f = feeders("circular", "", 2);
        assert_eq!(walk(&f, 0, 1, 3), [Ok(0), Ok(1), Ok(0)]);
    }

    #[test]
    fn ranges_and_shuffles() {
        let f = feeders("queue", r#", "ranges": [[1, 2], [3, 5]]"#, 6);
        assert_eq!(walk(&f, 0, 1, 4), [Ok(1), Ok(3), Ok(4), Err(())]);
        let f = feeders("queue", r#", "ranges": [[4, 18446744073709551615]]"#, 6);
        assert_eq!(walk(&f, 0, 1, 3), [Ok(4), Ok(5), Err(())]);
        let f = feeders("queue", r#", "ranges": [[6, 18446744073709551615]]"#, 6);
        assert_eq!(walk(&f, 0, 1, 1), [Err(())]);
        let f = feeders("shuffle", "", 50);
        let mut got: Vec<u64> = walk(&f, 0, 1, 50).into_iter().map(Result::unwrap).collect();
        assert_ne!(got, (0..50).collect::<Vec<_>>(), "shuffled");
        assert_eq!(
            got,
            walk(&feeders("shuffle", "", 50), 0, 1, 50)
                .into_iter()
                .map(Result::unwrap)
                .collect::<Vec<_>>()
        );
        got.sort_unstable();
        assert_eq!(got, (0..50).collect::<Vec<_>>(), "each row once");
    }

    #[test]
    fn scope_client_walks_each_clients_own_slice() {
        let f = feeders("queue", r#", "scope": "client""#, 5);
        assert_eq!(walk(&f, 0, 2, 3), [Ok(0), Ok(1), Err(())]);
        assert_eq!(walk(&f, 1, 2, 4), [Ok(2), Ok(3), Ok(4), Err(())]);
        let f = feeders("circular", r#", "scope": "client""#, 4);
        assert_eq!(walk(&f, 1, 2, 3), [Ok(2), Ok(3), Ok(0)]);
    }

    #[test]
    fn random_rows_are_seeded_and_spread() {
        let f = feeders("random", "", 10);
        let a = walk(&f, 4, 8, 1000);
        assert_eq!(a, walk(&f, 4, 8, 1000));
        let mut seen = [0; 10];
        a.iter().for_each(|r| seen[*r.as_ref().unwrap() as usize] += 1);
        assert!(seen.iter().all(|&n| n > 50), "{seen:?}");
    }
}
