//! How a property's name is spelled in CEL (k8s.io/apiserver/pkg/cel `escaping.go`): names
//! that are not CEL identifiers are escaped, and names that cannot be escaped are not
//! reachable by field selection.

/// CEL's reserved words: a property of one of these names is reached as `__<word>__`.
const RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The CEL identifier a property named `name` is selected by: `__` as `__underscores__`, `.`
/// as `__dot__`, `-` as `__dash__`, `/` as `__slash__`, a reserved word `w` as `__w__`.
/// `None` for a name that is empty, starts with a digit, or has another character outside
/// `[a-zA-Z0-9_.-/]`.
pub fn escape(name: &str) -> Option<String> {
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn names_are_escaped_as_kube_escapes_them() {
        assert_eq!(escape("replicas").as_deref(), Some("replicas"));
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(escape("a-b.c/d").as_deref(), Some("a__dash__b__dot__c__slash__d"));
        assert_eq!(escape("x__y").as_deref(), Some("x__underscores__y"));
        assert_eq!(escape("_x").as_deref(), Some("_x"));
        assert_eq!(escape("1x"), None);
        assert_eq!(escape("a b"), None);
        assert_eq!(escape(""), None);
    }
}
