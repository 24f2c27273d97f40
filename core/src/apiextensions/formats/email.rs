//! The `email` format: what Go's `net/mail.ParseAddress` accepts (govalidator's `IsEmail`): one
//! RFC 5322 address, `local@domain` or `Name <local@domain>`, possibly with a comment or as
//! the only member of a group.

/// Whether Go's `mail.ParseAddress` parses `s` into one address.
pub fn is_address(s: &str) -> bool {
    let mut p = Parser { s };
    let Some(count) = p.address(true) else { return false };
    p.skip_cfws() && p.s.is_empty() && count == 1
}

struct Parser<'a> {
    s: &'a str,
}

impl Parser<'_> {
    fn skip_space(&mut self) {
        self.s = self.s.trim_start_matches([' ', '\t']);
    }

    fn consume(&mut self, c: char) -> bool {
        match self.s.strip_prefix(c) {
            Some(rest) => {
                self.s = rest;
                true
            }
            None => false,
        }
    }

    fn peek(&self) -> Option<char> {
        self.s.chars().next()
    }

    /// `address = mailbox / group`: how many addresses it holds.
    fn address(&mut self, groups: bool) -> Option<usize> {
        self.skip_space();
        if self.s.is_empty() {
            return None;
        }
        let start = self.s;
        if self.addr_spec() {
            self.skip_space();
            // A comment after the address is its display name.
            if self.consume('(') && !self.comment()?.split([' ', '\t']).all(encoded_word_ok) {
                return None;
            }
            return Some(1);
        }
        self.s = start;
        if self.peek() != Some('<') && !self.phrase() {
            return None;
        }
        self.skip_space();
        if groups && self.consume(':') {
            return self.group();
        }
        if !self.consume('<') || !self.addr_spec() || !self.consume('>') {
            return None;
        }
        Some(1)
    }

    /// A group's members after its `:`, up to its `;`.
    fn group(&mut self) -> Option<usize> {
        self.skip_space();
        if self.consume(';') {
            return self.skip_cfws().then_some(0);
        }
        let mut count = 0;
        loop {
            self.skip_space();
            count += self.address(false)?;
            if !self.skip_cfws() {
                return None;
            }
            if self.consume(';') {
                return self.skip_cfws().then_some(count);
            }
            if !self.consume(',') {
                return None;
            }
        }
    }

    /// `local-part "@" domain`, each a dot-atom, the local part possibly a quoted string and
    /// the domain an IP address in brackets.
    fn addr_spec(&mut self) -> bool {
        self.skip_space();
        let local = match self.peek() {
            None => return false,
            Some('"') => self.quoted_string().is_some_and(|q| !q.is_empty()),
            Some(_) => self.atom(true, false),
        };
        if !local || !self.consume('@') {
            return false;
        }
        self.skip_space();
        match self.peek() {
            None => false,
            Some('[') => self.domain_literal(),
            Some(_) => self.atom(true, false),
        }
    }

    /// A run of atom characters (and dots with `dot`); without `permissive`, no leading,
    /// trailing or doubled dot.
    fn atom(&mut self, dot: bool, permissive: bool) -> bool {
        let len: usize = self.s.chars().take_while(|c| is_atext(*c, dot)).map(char::len_utf8).sum();
        if len == 0 {
            return false;
        }
        let atom = &self.s[..len];
        self.s = &self.s[len..];
        permissive || !(atom.starts_with('.') || atom.ends_with('.') || atom.contains(".."))
    }

    /// A quoted string (the opening quote next), its content.
    fn quoted_string(&mut self) -> Option<String> {
        let mut out = String::new();
        let mut escaped = false;
        for (i, c) in self.s.char_indices().skip(1) {
            if escaped {
                if !is_vchar(c) && !is_wsp(c) {
                    return None;
                }
                out.push(c);
                escaped = false;
            } else if c == '"' {
                self.s = &self.s[i + 1..];
                return Some(out);
            } else if c == '\\' {
                escaped = true;
            } else if is_qtext(c) || is_wsp(c) {
                out.push(c);
            } else {
                return None;
            }
        }
        None
    }

    /// `[dtext]` holding an IP address.
    fn domain_literal(&mut self) -> bool {
        self.s = &self.s[1..];
        let Some(close) = self.s.find(']') else { return false };
        let text = &self.s[..close];
        if !text.chars().all(|c| c != '[' && c != '\\' && is_vchar(c)) {
            return false;
        }
        self.s = &self.s[close + 1..];
        text.parse::<core::net::IpAddr>().is_ok()
    }

    /// `phrase = 1*word`, words being atoms (dots allowed) or quoted strings; comments may
    /// follow words. A phrase ends at the first thing that is no word.
    fn phrase(&mut self) -> bool {
        let mut words = 0;
        loop {
            if words > 0 && !self.skip_cfws() {
                return false;
            }
            self.skip_space();
            let word = match self.peek() {
                None => break,
                Some('"') => self.quoted_string().is_some(),
                Some(_) => {
                    let before = self.s;
                    self.atom(true, true) && encoded_word_ok(&before[..before.len() - self.s.len()])
                }
            };
            if !word {
                break;
            }
            words += 1;
        }
        words > 0
    }

    /// Whitespace and parenthesized comments; false for an unclosed comment.
    fn skip_cfws(&mut self) -> bool {
        self.skip_space();
        while self.consume('(') {
            if self.comment().is_none() {
                return false;
            }
            self.skip_space();
        }
        true
    }

    /// The rest of a comment (its `(` consumed), nested comments and escapes within: its text
    /// without the escaping backslashes; `None` when it is not closed.
    fn comment(&mut self) -> Option<String> {
        let mut depth = 1;
        let mut text = Vec::new();
        let mut bytes = self.s.bytes().enumerate();
        while let Some((i, b)) = bytes.next() {
            let b = match b {
                b'\\' if i + 1 < self.s.len() => bytes.next().expect("a byte after the backslash").1,
                b'(' => {
                    depth += 1;
                    b
                }
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        self.s = &self.s[i + 1..];
                        return Some(String::from_utf8_lossy(&text).into_owned());
                    }
                    b
                }
                b => b,
            };
            text.push(b);
        }
        None
    }
}

/// A word that is an RFC 2047 encoded word must name a charset Go's decoder knows; an encoded
/// word that does not decode is taken as text, as Go takes it.
fn encoded_word_ok(word: &str) -> bool {
    let Some(inner) = word.strip_prefix("=?").and_then(|w| w.strip_suffix("?=")) else { return true };
    let parts: Vec<&str> = inner.split('?').collect();
    let [charset, encoding, text] = parts[..] else { return true };
    let decodes = match encoding {
        "b" | "B" => base64::Engine::decode(&base64::engine::general_purpose::STANDARD, text).is_ok(),
        "q" | "Q" => q_decodes(text),
        _ => false,
    };
    charset.is_empty() || !decodes || ["utf-8", "iso-8859-1", "us-ascii"].iter().any(|c| c.eq_ignore_ascii_case(charset))
}

/// Whether Go's `qDecode` takes `text`: printable ASCII and tabs or line ends, `=XX` escapes.
fn q_decodes(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'=' if i + 2 < b.len() && b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit() => i += 3,
            b'=' => return false,
            b' '..=b'~' | b'\n' | b'\r' | b'\t' => i += 1,
            _ => return false,
        }
    }
    true
}

fn is_atext(c: char, dot: bool) -> bool {
    match c {
        '.' => dot,
        '(' | ')' | '<' | '>' | '[' | ']' | ':' | ';' | '@' | '\\' | ',' | '"' => false,
        c => is_vchar(c),
    }
}

fn is_vchar(c: char) -> bool {
    ('!'..='~').contains(&c) || !c.is_ascii()
}

fn is_qtext(c: char) -> bool {
    c != '\\' && c != '"' && is_vchar(c)
}

fn is_wsp(c: char) -> bool {
    c == ' ' || c == '\t'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_as_go_parses_them() {
        let good =
            ["a@b", "a.b@c.d", "Bob <bob@example.com>", "<a@b>", "\"a b\"@example.com", "a@[127.0.0.1]", "a@b (Bob Smith)", "g: a@b;", " a@b ", "José <j@b>"];
        for s in good {
            assert!(is_address(s), "{s}");
        }
        let bad =
            ["", "a", "a@", "@b", "a@b c", "a..b@c", ".a@b", "<a@b", "a@[1.2.3]", "g: a@b, c@d;", "g: ;", "a@b (unclosed", "\"\"@b", "=?x-unknown?q?a?= <a@b>"];
        for s in bad {
            assert!(!is_address(s), "{s}");
        }
    }
}
