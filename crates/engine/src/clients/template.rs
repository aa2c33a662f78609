//! `${client}` / `${iteration}` substitution, parsed once.

enum Part {
    Lit(String),
    Client,
    Iteration,
}

pub(crate) struct Template {
    parts: Vec<Part>,
}

impl Template {
    pub fn new(s: &str) -> Template {
        let mut parts = Vec::new();
        let mut rest = s;
        while let Some(i) = rest.find("${") {
            let (var, part) = if rest[i..].starts_with("${client}") {
                ("${client}", Part::Client)
            } else if rest[i..].starts_with("${iteration}") {
                ("${iteration}", Part::Iteration)
            } else {
                parts.push(Part::Lit(rest[..i + 2].to_string()));
                rest = &rest[i + 2..];
                continue;
            };
            if i > 0 {
                parts.push(Part::Lit(rest[..i].to_string()));
            }
            parts.push(part);
            rest = &rest[i + var.len()..];
        }
        if !rest.is_empty() {
            parts.push(Part::Lit(rest.to_string()));
        }
        Template { parts }
    }

    pub fn render(&self, client: u64, iteration: u64) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Lit(s) => out.push_str(s),
                Part::Client => write!(out, "{client}").expect("writing to a String cannot fail"),
                Part::Iteration => write!(out, "{iteration}").expect("writing to a String cannot fail"),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::Template;

    #[test]
    fn substitutes_both_variables_and_keeps_other_text() {
        let t = Template::new("/tmp/out-${client}-${iteration}.${x}$");
        assert_eq!(t.render(3, 17), "/tmp/out-3-17.${x}$");
        assert_eq!(Template::new("plain").render(1, 2), "plain");
        assert_eq!(Template::new("${client}").render(0, 2), "0");
    }
}
