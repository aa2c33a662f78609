//! `correlate`: the JSONPath of the value a reply shares with the message it answers (`$.id`, `$.meta.request`,
//! `$.items[0].id`, `$['a b']`): a dotted name, a quoted name in brackets, or an index, after `$`.

use serde_json::Value;

/// One step of a path.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Step {
    Name(String),
    Index(usize),
}

/// Parse a JSONPath of names and indices; Err: what is wrong with it, in words.
pub(crate) fn parse(path: &str) -> Result<Vec<Step>, String> {
    let Some(mut rest) = path.strip_prefix('$') else {
        return Err("it must start with $ (the message), e.g. $.id".into());
    };
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let name = &after[..end];
            if name.is_empty() || name == "*" {
                return Err(format!(
                    "a name must follow '.' (at {rest:?}); wildcards are not correlations"
                ));
            }
            steps.push(Step::Name(name.to_string()));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after
                .find(']')
                .ok_or_else(|| format!("'[' without ']' (at {rest:?})"))?;
            let inside = after[..end].trim();
            let quoted = inside
                .strip_prefix('\'')
                .and_then(|s| s.strip_suffix('\''))
                .or_else(|| inside.strip_prefix('"').and_then(|s| s.strip_suffix('"')));
            steps.push(match (quoted, inside.parse::<usize>()) {
                (Some(name), _) => Step::Name(name.to_string()),
                (None, Ok(i)) => Step::Index(i),
                (None, Err(_)) => return Err(format!("[{inside}] is neither an index nor a quoted name")),
            });
            rest = &after[end + 1..];
        } else {
            return Err(format!("expected '.' or '[' at {rest:?}"));
        }
    }
    if steps.is_empty() {
        return Err("$ alone is the whole message: name the field that correlates, e.g. $.id".into());
    }
    Ok(steps)
}

/// The value at `steps` in the JSON text `bytes` (None: not JSON, or nothing there).
pub(crate) fn value_at(bytes: &[u8], steps: &[Step]) -> Option<Value> {
    let mut v: Value = serde_json::from_slice(bytes).ok()?;
    for s in steps {
        v = match (s, v) {
            (Step::Name(n), Value::Object(mut m)) => m.remove(n)?,
            (Step::Index(i), Value::Array(mut a)) if *i < a.len() => a.swap_remove(*i),
            _ => return None,
        };
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse_and_find_their_values() {
        let p = parse("$.meta['request id'][1].n").unwrap();
        assert_eq!(
            p,
            vec![
                Step::Name("meta".into()),
                Step::Name("request id".into()),
                Step::Index(1),
                Step::Name("n".into())
            ]
        );
        let doc = br#"{"meta": {"request id": [{"n": 1}, {"n": 7}]}}"#;
        assert_eq!(value_at(doc, &p), Some(serde_json::json!(7)));
        assert_eq!(value_at(b"not json", &p), None);
        assert_eq!(value_at(br#"{"meta": {}}"#, &p), None);
        for bad in ["id", "$", "$.", "$.*", "$[x]", "$[0", "$..id"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
