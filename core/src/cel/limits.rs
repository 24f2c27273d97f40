//! How deep an expression's tree can be, read from its text without parsing it (the parser
//! itself recurses once per level): the longest chain of operators, member selections and
//! indexes, through the brackets that nest them. `&&`, `||`, `?:` and commas start a new chain
//! (cel-go balances the logical operators; arguments are siblings). String literals are
//! skipped. The estimate is never lower than the depth of a chain of binary operators.

/// One bracketed group being read: the chain so far, and the deepest seen in it.
#[derive(Default)]
struct Group {
    chain: usize,
    deepest: usize,
}

impl Group {
    fn depth(&self) -> usize {
        self.deepest.max(self.chain)
    }
}

/// The estimated depth of `source`'s tree.
pub fn nesting(source: &str) -> usize {
    let bytes = source.as_bytes();
    let mut groups = vec![Group::default()];
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let next = bytes.get(i + 1).copied();
        let current = groups.last_mut().expect("the outermost group stays");
        match b {
            b'\'' | b'"' => {
                i = skip_string(bytes, i);
                continue;
            }
            b'(' | b'{' | b'[' => {
                if b == b'[' {
                    current.chain += 1;
                }
                groups.push(Group::default());
            }
            b')' | b'}' | b']' => close(&mut groups),
            b',' | b'?' | b':' => current.deepest = current.depth().max(std::mem::take(&mut current.chain)),
            b'&' | b'|' if next == Some(b) => {
                current.deepest = current.depth().max(std::mem::take(&mut current.chain));
                i += 1;
            }
            b'.' if i > 0 && bytes[i - 1].is_ascii_digit() && next.is_some_and(|n| n.is_ascii_digit()) => {}
            b'+' | b'-' | b'*' | b'/' | b'%' | b'<' | b'>' | b'!' | b'.' => current.chain += 1,
            b'=' if next == Some(b'=') => {
                current.chain += 1;
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    while groups.len() > 1 {
        close(&mut groups);
    }
    groups[0].depth()
}

/// Ends the innermost group (not the outermost): its depth is one level below where it
/// stands in the chain around it.
fn close(groups: &mut Vec<Group>) {
    if groups.len() > 1 {
        let inner = groups.pop().expect("more than one group").depth();
        let outer = groups.last_mut().expect("the outermost group stays");
        outer.deepest = outer.deepest.max(outer.chain + inner + 1);
    }
}

/// Where the string literal that starts at `start` ends (one past its closing quote, or the
/// end of the text).
fn skip_string(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let triple = bytes.get(start + 1) == Some(&quote) && bytes.get(start + 2) == Some(&quote);
    let mut i = start + if triple { 3 } else { 1 };
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            q if q == quote && !triple => return i + 1,
            q if q == quote && bytes.get(i + 1) == Some(&quote) && bytes.get(i + 2) == Some(&quote) => return i + 3,
            _ => i += 1,
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::nesting;

    #[test]
    fn chains_count_and_logical_operators_and_strings_do_not() {
        assert_eq!(nesting("self.a.b == 1"), 3);
        assert_eq!(nesting(&vec!["1"; 300].join(" + ")), 299);
        assert!(nesting(&vec!["self.a == 1"; 300].join(" && ")) < 5);
        assert_eq!(nesting("'+ + + + +' == \"-.-.-\""), 1);
        assert!(nesting(&format!("{}1{}", "(".repeat(50), ")".repeat(50))) >= 50);
        assert_eq!(nesting("1.5 + 2.5"), 1);
        assert!(nesting("f(a + b + c, d)") >= 3);
    }
}
