//! `pattern`s as Go's RE2 reads them, compiled once with the schema.

use regex::Regex;

/// A schema's `pattern`, matched anywhere in a string as Go's `regexp.MatchString` does.
#[derive(Clone, Debug)]
pub struct Pattern {
    source: String,
    /// Rust's error when the pattern does not compile (kube refuses such a CRD).
    regex: Result<Regex, String>,
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Pattern {
    pub fn new(source: &str) -> Pattern {
        Pattern { source: source.to_string(), regex: Regex::new(&ascii_classes(source)).map_err(|e| e.to_string()) }
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Why the pattern does not compile, in the words of Go's `regexp` where kapi knows them
    /// (an unclosed or unopened group), else in those of Rust's regex.
    pub fn problem(&self) -> Option<String> {
        let Err(rust) = &self.regex else { return None };
        let what = rust.lines().filter_map(|l| l.strip_prefix("error: ")).next().unwrap_or(rust).to_string();
        Some(match what.as_str() {
            "unclosed group" => format!("error parsing regexp: missing closing ): `{}`", self.source),
            "unopened group" => format!("error parsing regexp: unexpected ): `{}`", self.source),
            _ => format!("error parsing regexp: {what}"),
        })
    }

    /// Whether `s` matches; a pattern that does not compile matches everything.
    pub fn is_match(&self, s: &str) -> bool {
        self.regex.as_ref().map_or(true, |re| re.is_match(s))
    }
}

/// The pattern with Go's ASCII-only `\d`, `\w`, `\s` and `\b` (and their negations) spelled
/// so that Rust's regex, whose classes are Unicode, reads them as Go does.
fn ascii_classes(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str("[0-9]"),
            Some('D') => out.push_str("[^0-9]"),
            Some('w') => out.push_str("[0-9A-Za-z_]"),
            Some('W') => out.push_str("[^0-9A-Za-z_]"),
            Some('s') => out.push_str("[\\t\\n\\f\\r ]"),
            Some('S') => out.push_str("[^\\t\\n\\f\\r ]"),
            Some('b') => out.push_str("(?-u:\\b)"),
            Some('B') => out.push_str("(?-u:\\B)"),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_ascii_as_in_go() {
        assert!(Pattern::new(r"^\d+$").is_match("123") && !Pattern::new(r"^\d+$").is_match("١٢٣"));
        assert!(!Pattern::new(r"^\w+$").is_match("é") && Pattern::new(r"^[\w-]+$").is_match("a-b_c"));
        assert!(Pattern::new(r"^\\d$").is_match("\\d"));
        assert!(Pattern::new("b").is_match("abc"), "unanchored");
    }
}
