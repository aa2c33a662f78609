//! Templates: `${client}`, `${iteration}`, `${NAME.COLUMN}` (the operation's row of data source NAME),
//! `${uuid}`, `${random_int(LO,HI)}`, `${random_string(N)}` and `${now_ms}` in a request's parts, compiled
//! once per group into parts; rendering an operation writes into a buffer its client reuses. `$${` is a
//! literal `${`.

use std::io::Write;

use regex::bytes::Regex;

use crate::data::{Draw, Feeders};
use crate::spec::line_regex;

enum Part {
    Lit(Vec<u8>),
    Client,
    Iteration,
    Field { feeder: usize, col: usize },
    Uuid,
    RandomInt { lo: i64, span: u64 },
    RandomString(usize),
    NowMs,
}

pub(crate) struct Template {
    parts: Vec<Part>,
    /// Data sources it reads, in order of first use.
    pub uses: Vec<usize>,
}

/// The data sources several templates read (their `uses`), each once, in the order of first use: what an
/// operation takes a row of.
pub(crate) fn uses_of<'a>(lists: impl IntoIterator<Item = &'a [usize]>) -> Vec<usize> {
    let mut out = Vec::new();
    for f in lists.into_iter().flatten() {
        if !out.contains(f) {
            out.push(*f);
        }
    }
    out
}

/// A regex that may hold placeholders (a tcp or WebSocket `expect`): compiled once when it holds none; else
/// filled in per operation, each value escaped (matched literally), and compiled then.
pub(crate) enum Pattern {
    Fixed(Regex),
    Templated(Template),
}

/// An operation's filled-in pattern: its regex, or why the filled-in text does not compile (validated with its
/// placeholders as literals, it still may not: an empty value before a `*`, a value past the regex size limit).
pub(crate) type Filled = Option<Result<Regex, String>>;

impl Pattern {
    /// `key` names it in errors.
    pub fn compile(p: &str, feeders: &Feeders, key: &str) -> Result<Pattern, String> {
        let t = Template::compile(p, feeders, key, true)?;
        if !t.is_fixed() {
            return Ok(Pattern::Templated(t));
        }
        line_regex(p)
            .map(Pattern::Fixed)
            .map_err(|e| format!("{key} {p:?}: {e}"))
    }

    /// The data sources it reads.
    pub fn uses(&self) -> &[usize] {
        match self {
            Pattern::Fixed(_) => &[],
            Pattern::Templated(t) => &t.uses,
        }
    }

    /// This operation's pattern filled in (None when it holds no placeholder).
    pub fn fill(&self, d: &mut Draw<'_>) -> Filled {
        let Pattern::Templated(t) = self else { return None };
        let mut text = Vec::new();
        t.render_escaped(&mut text, d, |v, out| {
            out.extend_from_slice(regex::escape(&String::from_utf8_lossy(v)).as_bytes())
        });
        let text = String::from_utf8_lossy(&text);
        Some(line_regex(&text).map_err(|e| format!("expect filled in as {text:?}: {e}")))
    }

    /// The regex an operation matches with: the fixed one, or the operation's `filled` one (None if it failed).
    pub fn current<'a>(&'a self, filled: &'a Filled) -> Option<&'a Regex> {
        match self {
            Pattern::Fixed(re) => Some(re),
            Pattern::Templated(_) => filled.as_ref().and_then(|r| r.as_ref().ok()),
        }
    }
}

/// The placeholders a template may hold, for error messages.
const KNOWN: &str = "${client}, ${iteration}, ${uuid}, ${now_ms}, ${random_int(LO,HI)}, ${random_string(N)} \
                     or ${DATA.COLUMN}";

impl Template {
    /// Parse `s` (`key` names it in errors). `strict`: a `${…}` that is none of knee's is an error; otherwise it
    /// is kept as text (a shell's `${HOME:-x}` in an exec argument).
    pub fn compile(s: &str, feeders: &Feeders, key: &str, strict: bool) -> Result<Template, String> {
        let mut t = Template {
            parts: Vec::new(),
            uses: Vec::new(),
        };
        let mut lit: Vec<u8> = Vec::new();
        let mut rest = s;
        while let Some(i) = rest.find("${") {
            if rest[..i].ends_with('$') {
                lit.extend_from_slice(&rest.as_bytes()[..i - 1]);
                lit.extend_from_slice(b"${");
                rest = &rest[i + 2..];
                continue;
            }
            lit.extend_from_slice(&rest.as_bytes()[..i]);
            let Some(close) = rest[i..].find('}') else {
                if strict {
                    return Err(format!(
                        "{key} {s:?} has a ${{ with no closing }}; close it, or write $${{ for a literal ${{"
                    ));
                }
                lit.extend_from_slice(&rest.as_bytes()[i..]);
                rest = "";
                break;
            };
            let inner = &rest[i + 2..i + close];
            match Template::part(inner, feeders, key, s)? {
                Some(p) => {
                    if !lit.is_empty() {
                        t.parts.push(Part::Lit(std::mem::take(&mut lit)));
                    }
                    if let Part::Field { feeder, .. } = p {
                        if !t.uses.contains(&feeder) {
                            t.uses.push(feeder);
                        }
                    }
                    t.parts.push(p);
                }
                None if strict => {
                    return Err(format!(
                        "{key} {s:?}: ${{{inner}}} is not something knee fills in; use {KNOWN}{}",
                        Template::sources(feeders)
                    ))
                }
                None => lit.extend_from_slice(&rest.as_bytes()[i..i + close + 1]),
            }
            rest = &rest[i + close + 1..];
        }
        lit.extend_from_slice(rest.as_bytes());
        if !lit.is_empty() {
            t.parts.push(Part::Lit(lit));
        }
        Ok(t)
    }

    fn sources(feeders: &Feeders) -> String {
        if feeders.list.is_empty() {
            " (the scenario has no data sources)".to_string()
        } else {
            let names: Vec<&str> = feeders.list.iter().map(|f| f.name.as_str()).collect();
            format!(" (data sources: {})", names.join(", "))
        }
    }

    /// The part `${inner}` stands for; None when it is none of knee's. Err: one of knee's, written wrong.
    fn part(inner: &str, feeders: &Feeders, key: &str, s: &str) -> Result<Option<Part>, String> {
        let bad = |why: String| Err(format!("{key} {s:?}: ${{{inner}}} {why}"));
        let call = |name: &str| {
            inner
                .strip_prefix(name)
                .and_then(|r| r.strip_prefix('('))
                .and_then(|r| r.strip_suffix(')'))
        };
        Ok(Some(match inner {
            "client" => Part::Client,
            "iteration" => Part::Iteration,
            "uuid" => Part::Uuid,
            "now_ms" => Part::NowMs,
            _ if call("random_int").is_some() => {
                let args: Vec<Option<i64>> = call("random_int")
                    .unwrap_or("")
                    .split(',')
                    .map(|a| a.trim().parse().ok())
                    .collect();
                match args[..] {
                    [Some(lo), Some(hi)] if lo <= hi => Part::RandomInt {
                        lo,
                        span: hi.abs_diff(lo).saturating_add(1),
                    },
                    _ => return bad("needs two whole numbers LO <= HI, e.g. ${random_int(1,100)}".into()),
                }
            }
            _ if call("random_string").is_some() => match call("random_string").unwrap_or("").trim().parse() {
                Ok(n) if (1..=65_536).contains(&n) => Part::RandomString(n),
                _ => return bad("needs a length from 1 to 65536, e.g. ${random_string(16)}".into()),
            },
            _ => {
                let Some((name, col)) = inner.split_once('.') else {
                    return Ok(None);
                };
                let ident = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !ident {
                    return Ok(None);
                }
                let Some(feeder) = feeders.index(name) else {
                    return bad(format!("names no data source {name:?}{}", Template::sources(feeders)));
                };
                let table = &feeders.list[feeder].table;
                let Some(c) = table.column(col) else {
                    return bad(format!(
                        "names no column of {name}: {name} has the columns {}",
                        table.columns.join(", ")
                    ));
                };
                Part::Field { feeder, col: c }
            }
        }))
    }

    /// A template of fixed bytes (a body file's).
    pub fn literal(bytes: Vec<u8>) -> Template {
        Template {
            parts: if bytes.is_empty() {
                Vec::new()
            } else {
                vec![Part::Lit(bytes)]
            },
            uses: Vec::new(),
        }
    }

    /// Append the text of a fixed template (`is_fixed`); placeholders, if any, are left out.
    pub fn render_fixed(&self, out: &mut Vec<u8>) {
        for p in &self.parts {
            if let Part::Lit(b) = p {
                out.extend_from_slice(b);
            }
        }
    }

    /// Only literal text: the same bytes for every operation.
    pub fn is_fixed(&self) -> bool {
        self.parts.iter().all(|p| matches!(p, Part::Lit(_)))
    }

    /// A fixed template's bytes (its `$${` written `${`); None when it holds a placeholder.
    pub fn fixed_text(&self) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        for p in &self.parts {
            let Part::Lit(b) = p else { return None };
            out.extend_from_slice(b);
        }
        Some(out)
    }

    /// Append this operation's text to `out`.
    pub fn render(&self, out: &mut Vec<u8>, d: &mut Draw<'_>) {
        for p in &self.parts {
            Template::part_text(p, out, d);
        }
    }

    /// As `render`, but every filled-in value goes through `escape` (a pattern's values are matched literally).
    pub fn render_escaped(&self, out: &mut Vec<u8>, d: &mut Draw<'_>, escape: impl Fn(&[u8], &mut Vec<u8>)) {
        let mut value = Vec::new();
        for p in &self.parts {
            match p {
                Part::Lit(b) => out.extend_from_slice(b),
                _ => {
                    value.clear();
                    Template::part_text(p, &mut value, d);
                    escape(&value, out);
                }
            }
        }
    }

    fn part_text(p: &Part, out: &mut Vec<u8>, d: &mut Draw<'_>) {
        match p {
            Part::Lit(b) => out.extend_from_slice(b),
            Part::Client => out.extend_from_slice(itoa::Buffer::new().format(d.client).as_bytes()),
            Part::Iteration => out.extend_from_slice(itoa::Buffer::new().format(d.iteration).as_bytes()),
            Part::Field { feeder, col } => out.extend_from_slice(d.field(*feeder, *col)),
            Part::Uuid => {
                let (a, b) = (d.state.rng.next_u64(), d.state.rng.next_u64());
                let a = (a & !0xF000) | 0x4000; // version 4
                let b = (b & !(0xC << 60)) | (0x8 << 60); // variant 10
                let _ = write!(
                    out,
                    "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                    a >> 32,
                    (a >> 16) & 0xFFFF,
                    a & 0xFFFF,
                    b >> 48,
                    b & 0xFFFF_FFFF_FFFF
                );
            }
            Part::RandomInt { lo, span } => {
                let v = lo.wrapping_add(d.state.rng.below(*span) as i64);
                out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
            }
            Part::RandomString(n) => {
                const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
                out.extend((0..*n).map(|_| CHARS[d.state.rng.below(CHARS.len() as u64) as usize]));
            }
            Part::NowMs => {
                let ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |t| t.as_millis() as u64);
                out.extend_from_slice(itoa::Buffer::new().format(ms).as_bytes());
            }
        }
    }

    /// This operation's text as a String (a program's argument).
    pub fn render_string(&self, d: &mut Draw<'_>) -> String {
        let mut out = Vec::new();
        self.render(&mut out, d);
        String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::Template;
    use crate::data::{ClientData, Draw, Feeders};
    use crate::spec::DataSpec;

    fn users() -> Feeders {
        let spec: DataSpec =
            serde_json::from_str(r#"{"name": "users", "text": "id,name\n7,ann\n8,bob\n", "format": "csv"}"#).unwrap();
        Feeders::new(&[spec], 1).unwrap()
    }

    fn render(t: &Template, f: &Feeders, client: u64, iteration: u64) -> String {
        let mut st = ClientData::new(f, client);
        let mut d = Draw {
            client,
            index: client,
            clients: 4,
            iteration,
            feeders: f,
            state: &mut st,
        };
        d.take(&t.uses).unwrap();
        t.render_string(&mut d)
    }

    #[test]
    fn substitutes_variables_rows_and_functions() {
        let f = users();
        let t = Template::compile(
            "/u/${users.id}?n=${users.name}&c=${client}-${iteration}$${x}",
            &f,
            "k",
            true,
        )
        .unwrap();
        assert_eq!(render(&t, &f, 3, 17), "/u/7?n=ann&c=3-17${x}");
        assert_eq!(render(&t, &f, 3, 18), "/u/8?n=bob&c=3-18${x}");
        let t = Template::compile(
            "${uuid} ${random_int(-2,2)} ${random_string(5)} ${now_ms}",
            &f,
            "k",
            true,
        )
        .unwrap();
        let out = render(&t, &f, 0, 0);
        let w: Vec<&str> = out.split(' ').collect();
        assert_eq!((w[0].len(), &w[0][14..15], w[2].len()), (36, "4", 5), "{out}");
        assert!((-2..=2).contains(&w[1].parse::<i64>().unwrap()));
        assert!(w[3].parse::<u64>().unwrap() > 1_700_000_000_000);
        assert!(Template::compile("plain", &f, "k", true).unwrap().is_fixed());
        // Not strict (exec): a shell's own ${…} stays as it is.
        let t = Template::compile("${HOME:-x} ${client}", &f, "k", false).unwrap();
        assert_eq!(render(&t, &f, 2, 0), "${HOME:-x} 2");
    }

    #[test]
    fn mistakes_are_one_sentence_naming_the_key_and_the_columns() {
        let f = users();
        let e = |s: &str| Template::compile(s, &f, "groups[0].client.url", true).err().unwrap();
        assert_eq!(
            e("/${users.nme}"),
            "groups[0].client.url \"/${users.nme}\": ${users.nme} names no column of users: users has the columns id, name"
        );
        assert!(e("/${people.id}").contains("names no data source \"people\" (data sources: users)"));
        assert!(e("/${iteration}x${oops}").contains("${oops} is not something knee fills in"));
        assert!(e("${random_int(5,1)}").contains("two whole numbers LO <= HI"));
        assert!(e("${random_string(0)}").contains("length from 1 to 65536"));
        assert!(e("/${client").contains("no closing }"));
    }
}
