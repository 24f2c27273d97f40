//! Pretty-printed JSON answers, as kube-apiserver writes them for `?pretty=true` and for
//! clients whose User-Agent starts with `curl`, `Wget` or `Mozilla/5.0` (its
//! `negotiation.isPrettyPrint`): Go's `json.MarshalIndent(obj, "", "  ")`, with empty objects
//! and arrays kept as `{}` and `[]`, and no newline at the end. The body is indented as it
//! streams, chunk by chunk, so a long list costs no more memory pretty than compact.

use bytes::Bytes;

use super::Effect;

/// Whether kube would pretty-print the answer to a request with this query and User-Agent.
pub fn wanted(pretty: Option<&str>, user_agent: Option<&str>) -> bool {
    if let Some(p) = pretty.filter(|p| !p.is_empty()) {
        return matches!(p, "1" | "t" | "T" | "TRUE" | "true" | "True");
    }
    user_agent.is_some_and(|ua| ["curl", "Wget", "Mozilla/5.0"].iter().any(|p| ua.starts_with(p)))
}

/// Indents the JSON bodies of the responses that pass through it.
#[derive(Default)]
pub struct Pretty {
    /// The response in hand is JSON.
    active: bool,
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// An object or array was just opened: a newline is due, unless it closes at once.
    opened: bool,
}

impl Pretty {
    pub fn pass(&mut self, effect: Effect) -> Effect {
        match effect {
            Effect::Respond(head) => {
                self.active = head.content_type().is_some_and(|ct| ct.starts_with("application/json"));
                Effect::Respond(head)
            }
            Effect::Body(b) if self.active => Effect::Body(Bytes::from(self.indent(&b))),
            other => other,
        }
    }

    fn newline(&self, out: &mut Vec<u8>) {
        out.push(b'\n');
        out.resize(out.len() + 2 * self.depth, b' ');
    }

    fn indent(&mut self, input: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(input.len() * 2);
        for &c in input {
            if self.in_string {
                out.push(c);
                match (self.escaped, c) {
                    (true, _) => self.escaped = false,
                    (false, b'\\') => self.escaped = true,
                    (false, b'"') => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            if c.is_ascii_whitespace() {
                continue;
            }
            if self.opened {
                self.opened = false;
                if c == b'}' || c == b']' {
                    self.depth -= 1;
                    out.push(c);
                    continue;
                }
                self.newline(&mut out);
            }
            match c {
                b'"' => {
                    self.in_string = true;
                    out.push(c);
                }
                b'{' | b'[' => {
                    out.push(c);
                    self.depth += 1;
                    self.opened = true;
                }
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    self.newline(&mut out);
                    out.push(c);
                }
                b',' => {
                    out.push(c);
                    self.newline(&mut out);
                }
                b':' => out.extend_from_slice(b": "),
                _ => out.push(c),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pretty(chunks: &[&str]) -> String {
        let mut p = Pretty::default();
        p.pass(Effect::Respond(super::super::respond::Head::new(200, "application/json")));
        let mut out = Vec::new();
        for c in chunks {
            let Effect::Body(b) = p.pass(Effect::Body(Bytes::copy_from_slice(c.as_bytes()))) else { panic!() };
            out.extend_from_slice(&b);
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn bodies_are_indented_as_gos_marshal_indent_writes_them_even_across_chunks() {
        let want =
            "{\n  \"kind\": \"List\",\n  \"metadata\": {},\n  \"items\": [\n    {\n      \"a\": \"x, {y}: \\\"z\\\"\",\n      \"b\": []\n    },\n    1\n  ]\n}";
        assert_eq!(pretty(&["{\"kind\":\"List\",\"metadata\":{},\"items\":[{\"a\":\"x, {y}: \\\"z\\\"\",\"b\":[]},1]}\n"]), want);
        assert_eq!(pretty(&["{\"kind\":\"List\",\"metadata\":{", "},\"items\":[{\"a\":\"x, {y}: \\", "\"z\\\"\",\"b\":[", "]},1]}\n"]), want);
    }

    #[test]
    fn kube_pretty_prints_for_the_query_or_a_browser_or_command_line_user_agent() {
        assert!(wanted(Some("true"), None) && wanted(None, Some("curl/8.5.0")) && wanted(None, Some("Mozilla/5.0 (X11)")));
        assert!(!wanted(Some("false"), Some("curl/8.5.0")) && !wanted(None, Some("kubectl/v1.33.0")) && !wanted(None, None));
    }
}
