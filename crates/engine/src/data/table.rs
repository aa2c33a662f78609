//! A data file's rows, loaded once per process and shared by every thread, client and step that reads it:
//! one buffer of field bytes and one end offset per field (no allocation per row or per field), so a file
//! of a million rows costs about its size plus 4 bytes a field.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// A UTF-8 byte order mark: before a file's first row, not part of it (CSV, TSV and JSON Lines alike).
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// How a data file is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// Comma-separated, a header row first; fields may be quoted ("a, b", "say ""hi""").
    Csv,
    /// Tab-separated, a header row first; no quoting.
    Tsv,
    /// JSON Lines: an object per line; its keys are the columns (a value that is not a string is its JSON text).
    Jsonl,
}

impl Format {
    /// The format a file's name says (.csv, .tsv/.tab, .jsonl/.ndjson), if any.
    pub fn of_path(path: &str) -> Option<Format> {
        let lower = path.to_ascii_lowercase();
        let ext = lower.rsplit('.').next().unwrap_or("");
        match ext {
            "csv" => Some(Format::Csv),
            "tsv" | "tab" => Some(Format::Tsv),
            "jsonl" | "ndjson" => Some(Format::Jsonl),
            _ => None,
        }
    }
}

/// The rows of one file.
#[derive(Debug)]
pub struct Table {
    pub columns: Vec<String>,
    buf: Vec<u8>,
    /// End offset in `buf` of every field, row after row.
    ends: Vec<u32>,
}

impl Table {
    pub fn rows(&self) -> u64 {
        if self.columns.is_empty() {
            0
        } else {
            (self.ends.len() / self.columns.len()) as u64
        }
    }

    /// Field `col` of row `row`.
    #[inline]
    pub fn field(&self, row: u64, col: usize) -> &[u8] {
        let i = row as usize * self.columns.len() + col;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.buf[start..self.ends[i] as usize]
    }

    /// Bytes held in memory.
    pub fn memory_bytes(&self) -> u64 {
        (self.buf.capacity() + self.ends.capacity() * 4 + self.columns.iter().map(|c| c.len() + 24).sum::<usize>())
            as u64
    }

    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }

    /// Parse `text` (`what` names it in errors: `data "users" (users.csv)`).
    #[cfg(test)]
    pub fn parse(text: &[u8], format: Format, what: &str) -> Result<Table, String> {
        Table::parse_owned(text.to_vec(), format, what)
    }

    /// Parse `text`, taking it: CSV and TSV fields are compacted in place (a field is never longer than the text
    /// it was read from), so the rows cost the file's size once, not twice, plus 4 bytes a field.
    pub fn parse_owned(text: Vec<u8>, format: Format, what: &str) -> Result<Table, String> {
        if text.len() > u32::MAX as usize {
            return Err(format!(
                "{what} is {} bytes; knee reads data files of up to 4 GiB",
                text.len()
            ));
        }
        let mut t = match format {
            Format::Jsonl => {
                let mut t = Table {
                    columns: Vec::new(),
                    buf: Vec::with_capacity(text.len()),
                    ends: Vec::new(),
                };
                t.parse_jsonl(&text, what)?;
                t
            }
            Format::Csv => Table::parse_delimited(text, b',', true, what)?,
            Format::Tsv => Table::parse_delimited(text, b'\t', false, what)?,
        };
        if t.columns.is_empty() {
            return Err(format!("{what} is empty; give a header row and at least one row"));
        }
        if t.rows() == 0 {
            return Err(format!(
                "{what} has a header ({}) but no rows; add rows",
                t.columns.join(", ")
            ));
        }
        t.buf.shrink_to_fit();
        t.ends.shrink_to_fit();
        Ok(t)
    }

    fn push(&mut self, field: &[u8]) {
        self.buf.extend_from_slice(field);
        self.ends.push(self.buf.len() as u32);
    }

    /// Records of `sep`-separated fields, `quotes`: RFC 4180's (CSV). Read at `i`, written at `w <= i` in the
    /// same buffer.
    fn parse_delimited(mut buf: Vec<u8>, sep: u8, quotes: bool, what: &str) -> Result<Table, String> {
        let mut i = if buf.starts_with(BOM) { BOM.len() } else { 0 };
        let (mut w, mut line) = (0usize, 1u64);
        let mut ends: Vec<u32> = Vec::new();
        let mut columns: Vec<String> = Vec::new();
        while i < buf.len() {
            let (row_line, row_start, row_w) = (line, ends.len(), w);
            // One record: fields until an unquoted line end.
            loop {
                if quotes && buf.get(i) == Some(&b'"') {
                    i += 1;
                    loop {
                        match buf.get(i).copied() {
                            None => {
                                return Err(format!(
                                    "{what} line {row_line}: a quoted field is not closed; end it with \""
                                ))
                            }
                            Some(b'"') if buf.get(i + 1) == Some(&b'"') => {
                                buf[w] = b'"';
                                w += 1;
                                i += 2;
                            }
                            Some(b'"') => {
                                i += 1;
                                break;
                            }
                            Some(c) => {
                                line += u64::from(c == b'\n');
                                buf[w] = c;
                                w += 1;
                                i += 1;
                            }
                        }
                    }
                    if !matches!(buf.get(i), None | Some(b'\n' | b'\r')) && buf.get(i) != Some(&sep) {
                        return Err(format!(
                            "{what} line {row_line}: text after a closing quote; quote the whole field"
                        ));
                    }
                } else {
                    while let Some(&c) = buf.get(i) {
                        if c == sep || c == b'\n' || c == b'\r' {
                            break;
                        }
                        buf[w] = c;
                        w += 1;
                        i += 1;
                    }
                }
                ends.push(w as u32);
                match buf.get(i) {
                    Some(&c) if c == sep => i += 1,
                    _ => break,
                }
            }
            if buf.get(i) == Some(&b'\r') {
                i += 1;
            }
            if buf.get(i) == Some(&b'\n') {
                i += 1;
            }
            line += 1;
            let fields = ends.len() - row_start;
            if fields == 1 && w == row_w {
                ends.truncate(row_start); // a blank line
                continue;
            }
            if columns.is_empty() {
                let mut from = row_w;
                for (c, &end) in ends[row_start..].iter().enumerate() {
                    let name = String::from_utf8_lossy(&buf[from..end as usize]).trim().to_string();
                    from = end as usize;
                    if name.is_empty() {
                        return Err(format!(
                            "{what} line {row_line}: column {} of the header has no name",
                            c + 1
                        ));
                    }
                    if columns.contains(&name) {
                        return Err(format!(
                            "{what} line {row_line}: column {name:?} is named twice in the header"
                        ));
                    }
                    columns.push(name);
                }
                // The rows start at the buffer's start; about a line a row from here.
                ends.clear();
                w = 0;
                let lines = buf[i..].iter().filter(|&&b| b == b'\n').count() + 1;
                ends.reserve(lines * columns.len());
                continue;
            }
            if fields != columns.len() {
                return Err(format!(
                    "{what} line {row_line} has {fields} fields but the header has {} ({}); fix the row{}",
                    columns.len(),
                    columns.join(", "),
                    if quotes {
                        " or quote a field that holds a comma"
                    } else {
                        ""
                    }
                ));
            }
        }
        buf.truncate(w);
        Ok(Table { columns, buf, ends })
    }

    fn parse_jsonl(&mut self, text: &[u8], what: &str) -> Result<(), String> {
        let text = text.strip_prefix(BOM).unwrap_or(text);
        for (n, raw) in text.split(|&b| b == b'\n').enumerate() {
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            if raw.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let line = n + 1;
            // A value that is not a string is kept as written (a number's digits, an object's key order): parsed
            // into a Value and written again, 123456789012345678901234 became 1.2345678901234568e23, 10.50 10.5.
            let obj: std::collections::BTreeMap<String, &serde_json::value::RawValue> = serde_json::from_slice(raw)
                .map_err(|e| format!("{what} line {line} is not a JSON object ({e}); write one object per line"))?;
            if self.columns.is_empty() {
                if obj.is_empty() {
                    return Err(format!("{what} line {line} is an empty object; give the row's fields"));
                }
                self.columns = obj.keys().cloned().collect();
            } else if obj.len() != self.columns.len() || !obj.keys().all(|k| self.columns.contains(k)) {
                let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
                return Err(format!(
                    "{what} line {line} has the keys {} but the first row has {}; give every row the same keys",
                    keys.join(", "),
                    self.columns.join(", ")
                ));
            }
            for c in 0..self.columns.len() {
                let value = obj[&self.columns[c]].get();
                if value.starts_with('"') {
                    let text: String = serde_json::from_str(value).map_err(|e| format!("{what} line {line}: {e}"))?;
                    self.push(text.as_bytes());
                } else {
                    self.push(value.as_bytes());
                }
            }
        }
        Ok(())
    }
}

struct Cached {
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
    format: Format,
    table: Arc<Table>,
}

/// Tables read from files, kept for the next shard of this process (a sweep's next step reads none again).
static CACHE: Mutex<Vec<Cached>> = Mutex::new(Vec::new());
/// Files kept in the cache at most (the oldest go first).
const CACHED: usize = 8;

/// The table in file `path`, read once per process while the file stays as it was.
pub fn load(path: &str, format: Format, what: &str) -> Result<Arc<Table>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{what}: cannot read {path:?} ({e}); fix the path"))?;
    let (len, modified) = (meta.len(), meta.modified().ok());
    let path_buf = PathBuf::from(path);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = cache
        .iter()
        .find(|c| c.path == path_buf && c.len == len && c.modified == modified && c.format == format)
    {
        return Ok(c.table.clone());
    }
    let text = std::fs::read(path).map_err(|e| format!("{what}: cannot read {path:?} ({e}); fix the path"))?;
    let table = Arc::new(Table::parse_owned(text, format, what)?);
    cache.retain(|c| c.path != path_buf);
    if cache.len() >= CACHED {
        cache.remove(0);
    }
    cache.push(Cached {
        path: path_buf,
        len,
        modified,
        format,
        table: table.clone(),
    });
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::{Format, Table};

    fn row(t: &Table, r: u64) -> Vec<String> {
        (0..t.columns.len())
            .map(|c| String::from_utf8_lossy(t.field(r, c)).to_string())
            .collect()
    }

    #[test]
    fn csv_with_quotes_crlf_and_blank_lines() {
        let t = Table::parse(
            b"\xEF\xBB\xBFid,name\r\n1,\"a, b\"\r\n\r\n2,\"say \"\"hi\"\"\"\n3,\"two\nlines\"\n4,\n",
            Format::Csv,
            "d",
        )
        .unwrap();
        assert_eq!(t.columns, ["id", "name"]);
        assert_eq!(t.rows(), 4);
        assert_eq!(row(&t, 0), ["1", "a, b"]);
        assert_eq!(row(&t, 1), ["2", "say \"hi\""]);
        assert_eq!(row(&t, 2), ["3", "two\nlines"]);
        assert_eq!(row(&t, 3), ["4", ""]);
    }

    /// JSONL's values as written: a string's text, any other value's JSON text to the letter.
    #[test]
    fn jsonl_values_are_kept_as_written() {
        let line = b"{\"id\": 123456789012345678901234, \"price\": 10.50, \"o\": {\"b\": 1, \"a\": 2}, \"s\": \"x\\\"y\", \"n\": null}\n";
        let t = Table::parse(line, Format::Jsonl, "d").unwrap();
        assert_eq!(t.columns, ["id", "n", "o", "price", "s"]);
        assert_eq!(
            row(&t, 0),
            [
                "123456789012345678901234",
                "null",
                "{\"b\": 1, \"a\": 2}",
                "10.50",
                "x\"y"
            ]
        );
    }

    /// A UTF-8 BOM before the first object is not part of it (as for CSV; it said "line 1 is not a JSON object").
    #[test]
    fn jsonl_after_a_bom() {
        let t = Table::parse(b"\xEF\xBB\xBF{\"id\": 1}\n{\"id\": 2}\n", Format::Jsonl, "d").unwrap();
        assert_eq!((t.columns.as_slice(), t.rows()), (["id".to_string()].as_slice(), 2));
        assert_eq!(row(&t, 1), ["2"]);
    }

    #[test]
    fn ragged_rows_and_bad_files_are_one_sentence() {
        let e = Table::parse(b"id,name\n1,a\n2\n", Format::Csv, "data \"u\" (u.csv)").unwrap_err();
        assert_eq!(
            e,
            "data \"u\" (u.csv) line 3 has 1 fields but the header has 2 (id, name); fix the row or quote a field \
             that holds a comma"
        );
        assert!(Table::parse(b"", Format::Csv, "d").unwrap_err().contains("is empty"));
        assert!(Table::parse(b"id\n", Format::Csv, "d").unwrap_err().contains("no rows"));
        assert!(Table::parse(b"id,id\n1,2\n", Format::Csv, "d")
            .unwrap_err()
            .contains("named twice"));
        assert!(Table::parse(b"a\n\"x\n", Format::Csv, "d")
            .unwrap_err()
            .contains("not closed"));
        let e = Table::parse(b"{\"a\": 1}\n{\"b\": 2}\n", Format::Jsonl, "d").unwrap_err();
        assert!(e.contains("line 2 has the keys b but the first row has a"), "{e}");
        assert!(Table::parse(b"[1]\n", Format::Jsonl, "d")
            .unwrap_err()
            .contains("not a JSON object"));
    }

    #[test]
    fn tsv_and_json_lines() {
        let t = Table::parse(b"a\tb\nx y\t\"q\"\n", Format::Tsv, "d").unwrap();
        assert_eq!(row(&t, 0), ["x y", "\"q\""]);
        let t = Table::parse(
            b"{\"id\": 7, \"n\": \"x\", \"o\": {\"k\": true}}\n\n{\"n\": \"y\", \"id\": 8, \"o\": null}\n",
            Format::Jsonl,
            "d",
        )
        .unwrap();
        let id = t.column("id").unwrap();
        let n = t.column("n").unwrap();
        assert_eq!(
            (t.field(0, id), t.field(1, id), t.field(1, n)),
            (&b"7"[..], &b"8"[..], &b"y"[..])
        );
        assert_eq!(t.field(0, t.column("o").unwrap()), b"{\"k\": true}");
    }
}
