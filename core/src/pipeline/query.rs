//! URL query strings: `application/x-www-form-urlencoded` decoding and kube's parameter forms.

/// The parameters of a query, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Query(Vec<(String, String)>);

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A request path percent-decoded as Go's `url.URL.Path` is (kube routes on the decoded path,
/// so `%2D` is `-` and `%2F` a separator); `None` for a `%` without two hex digits after it,
/// or bytes that are not UTF-8, which Go's server answers with 400 before any handler.
pub fn decode_path(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_string());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let (h, l) = (hex(*b.get(i + 1)?)?, hex(*b.get(i + 2)?)?);
            out.push(h * 16 + l);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

impl Query {
    pub fn parse(q: &str) -> Query {
        Query(
            q.split('&')
                .filter(|p| !p.is_empty())
                .map(|p| match p.split_once('=') {
                    Some((k, v)) => (decode(k), decode(v)),
                    None => (decode(p), String::new()),
                })
                .collect(),
        )
    }

    /// The first value of a parameter.
    pub fn get(&self, k: &str) -> Option<&str> {
        self.0.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str())
    }

    pub fn all(&self, k: &str) -> impl Iterator<Item = &str> {
        self.0.iter().filter(move |(key, _)| key == k).map(|(_, v)| v.as_str())
    }

    /// A boolean parameter as kube reads it: present and not `false`/`0`.
    pub fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some(v) if !matches!(v.to_ascii_lowercase().as_str(), "false" | "0"))
    }

    /// A boolean parameter that must parse (`strconv.ParseBool`).
    pub fn bool(&self, k: &str) -> Result<Option<bool>, String> {
        match self.get(k) {
            None => Ok(None),
            Some(v) => match v {
                "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(Some(true)),
                "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(Some(false)),
                other => Err(format!("strconv.ParseBool: parsing {other:?}: invalid syntax")),
            },
        }
    }

    pub fn int(&self, k: &str) -> Result<Option<i64>, String> {
        match self.get(k) {
            None | Some("") => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| format!("strconv.ParseInt: parsing {v:?}: invalid syntax")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_decode_as_go_decodes_them() {
        assert_eq!(decode_path("/api/v1/namespaces/default/configmaps/my%2Dcm").as_deref(), Some("/api/v1/namespaces/default/configmaps/my-cm"));
        assert_eq!(decode_path("/a%2Fb+c").as_deref(), Some("/a/b+c"));
        assert_eq!(decode_path("/a%zz"), None);
        assert_eq!(decode_path("/a%2"), None);
        assert_eq!(decode_path("/a%ff"), None);
    }

    #[test]
    fn decodes_percent_and_plus() {
        let q = Query::parse("labelSelector=app%3Dweb%2Ctier+in+%28a%29&watch=1&limit=5&x");
        assert_eq!(q.get("labelSelector"), Some("app=web,tier in (a)"));
        assert!(q.flag("watch"));
        assert_eq!(q.int("limit").unwrap(), Some(5));
        assert_eq!(q.get("x"), Some(""));
        assert!(!Query::parse("watch=false").flag("watch"));
    }
}
