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
    fn decodes_percent_and_plus() {
        let q = Query::parse("labelSelector=app%3Dweb%2Ctier+in+%28a%29&watch=1&limit=5&x");
        assert_eq!(q.get("labelSelector"), Some("app=web,tier in (a)"));
        assert!(q.flag("watch"));
        assert_eq!(q.int("limit").unwrap(), Some(5));
        assert_eq!(q.get("x"), Some(""));
        assert!(!Query::parse("watch=false").flag("watch"));
    }
}
