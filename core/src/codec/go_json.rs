//! The syntax errors Go's `encoding/json` reports (its `checkValid` scanner), which kube's
//! decoding errors quote: `invalid character 'n' looking for beginning of object key string`,
//! `unexpected end of JSON input`, ...; and its type errors.

use serde_json::Value;

use crate::config_file::json_kind;

/// Go's error for `v` decoded into a field of `go_type`; `field` is the innermost struct's
/// name and the field's path from the root (`AdmissionResponse.response.allowed`).
pub fn mistyped(v: &Value, field: &str, go_type: &str) -> String {
    format!("json: cannot unmarshal {} into Go struct field {field} of type {go_type}", json_kind(v))
}

/// A `[]byte` field as Go decodes it: from a base64 string ([`std_base64`]) or from an array
/// of numbers, each a `uint8` (a null is no value); `field` names it in a type error (a
/// number is written as serde_json writes it, where Go quotes its text).
pub fn bytes(v: &Value, field: &str) -> Result<Vec<u8>, String> {
    match v {
        Value::Null => Ok(Vec::new()),
        Value::String(text) => std_base64(text.as_bytes()),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::Null => Ok(0),
                Value::Number(n) => n
                    .as_u64()
                    .and_then(|b| u8::try_from(b).ok())
                    .ok_or_else(|| format!("json: cannot unmarshal number {n} into Go struct field {field} of type uint8")),
                other => Err(mistyped(other, field, "uint8")),
            })
            .collect(),
        other => Err(mistyped(other, field, "[]uint8")),
    }
}

/// Go's `base64.StdEncoding.Decode`, quantum by quantum as its `decodeQuantum`: padded, line
/// breaks skipped, the last symbol's unused bits ignored; its error is Go's `illegal base64
/// data at input byte <n>`, `n` counted in `src`.
pub fn std_base64(src: &[u8]) -> Result<Vec<u8>, String> {
    let corrupt = |at: usize| format!("illegal base64 data at input byte {at}");
    let symbol = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let line_break = |c: u8| c == b'\n' || c == b'\r';
    let mut out = Vec::with_capacity(src.len() / 4 * 3);
    let mut si = 0;
    while si < src.len() {
        let mut quantum = [0u32; 4];
        let (mut j, mut symbols, mut trailing) = (0, 4, None);
        while j < 4 {
            let Some(&c) = src.get(si) else {
                return if j == 0 { Ok(out) } else { Err(corrupt(si - j)) };
            };
            si += 1;
            if let Some(v) = symbol(c) {
                quantum[j] = u32::from(v);
                j += 1;
                continue;
            }
            if line_break(c) {
                continue;
            }
            if c != b'=' || j < 2 {
                return Err(corrupt(si - 1));
            }
            if j == 2 {
                // A second `=` is due.
                while src.get(si).is_some_and(|&c| line_break(c)) {
                    si += 1;
                }
                match src.get(si) {
                    None => return Err(corrupt(src.len())),
                    Some(b'=') => si += 1,
                    Some(_) => return Err(corrupt(si - 1)),
                }
            }
            while src.get(si).is_some_and(|&c| line_break(c)) {
                si += 1;
            }
            trailing = (si < src.len()).then_some(si);
            symbols = j;
            break;
        }
        let v = quantum[0] << 18 | quantum[1] << 12 | quantum[2] << 6 | quantum[3];
        out.extend_from_slice(&v.to_be_bytes()[1..symbols]);
        if let Some(at) = trailing {
            return Err(corrupt(at));
        }
    }
    Ok(out)
}

/// `data` as kube's decoders read a document: when it is not JSON, Go's syntax error in the
/// words of their first step (reading its `apiVersion` and `kind`).
pub fn parse(data: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(data).map_err(|e| format!("couldn't get version/kind; json parse error: {}", syntax_error(data).unwrap_or_else(|| e.to_string())))
}

/// The error of kube's decoders for a document `v` that is not a JSON object, met when they
/// read its `apiVersion` and `kind` first.
pub fn not_type_meta(v: &Value) -> String {
    format!(
        "couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}",
        json_kind(v)
    )
}

/// What the scanner expects next.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    BeginValue,
    BeginValueOrEmpty,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    InStringEscU(u8),
    Neg,
    One,
    Zero,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    /// The rest of a literal (`true`, `false`, `null`) and how far into it the scanner is.
    Literal(&'static [u8], usize),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Parse {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

/// Go's `quoteChar`: the byte taken as a rune, quoted as `strconv.Quote` quotes it.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".into(),
        b'"' => "'\"'".into(),
        c if c.is_ascii_graphic() || c == b' ' => format!("'{}'", c as char),
        b'\n' => r"'\n'".into(),
        b'\r' => r"'\r'".into(),
        b'\t' => r"'\t'".into(),
        0x07 => r"'\a'".into(),
        0x08 => r"'\b'".into(),
        0x0c => r"'\f'".into(),
        0x0b => r"'\v'".into(),
        c if c < 0x80 => format!(r"'\x{c:02x}'"),
        // Latin-1 letters and symbols print; controls, no-break space and soft hyphen do not.
        c if c > 0xa0 && c != 0xad => format!("'{}'", char::from(c)),
        c => format!(r"'\u{:04x}'", c),
    }
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// Go's error for `data` if it is not valid JSON, `None` if it is.
pub fn syntax_error(data: &[u8]) -> Option<String> {
    let mut stack: Vec<Parse> = Vec::new();
    let mut step = Step::BeginValue;
    let err = |c: u8, context: &str| Some(format!("invalid character {} {context}", quote_char(c)));
    for &c in data {
        // Values end where the next byte is not part of them: that byte is then read again.
        let mut again = true;
        while again {
            again = false;
            step = match step {
                Step::BeginValue | Step::BeginValueOrEmpty if is_space(c) => step,
                Step::BeginValueOrEmpty if c == b']' => match end_value_in(&mut stack, c) {
                    Ok(s) => s,
                    Err(e) => return Some(e),
                },
                Step::BeginValue | Step::BeginValueOrEmpty => match c {
                    b'{' => {
                        stack.push(Parse::ObjectKey);
                        Step::BeginStringOrEmpty
                    }
                    b'[' => {
                        stack.push(Parse::ArrayValue);
                        Step::BeginValueOrEmpty
                    }
                    b'"' => Step::InString,
                    b'-' => Step::Neg,
                    b'0' => Step::Zero,
                    b'1'..=b'9' => Step::One,
                    b't' => Step::Literal(b"true", 1),
                    b'f' => Step::Literal(b"false", 1),
                    b'n' => Step::Literal(b"null", 1),
                    _ => return err(c, "looking for beginning of value"),
                },
                Step::BeginStringOrEmpty | Step::BeginString if is_space(c) => step,
                Step::BeginStringOrEmpty if c == b'}' => {
                    if let Some(top) = stack.last_mut() {
                        *top = Parse::ObjectValue;
                    }
                    match end_value_in(&mut stack, c) {
                        Ok(s) => s,
                        Err(e) => return Some(e),
                    }
                }
                Step::BeginStringOrEmpty | Step::BeginString => match c {
                    b'"' => Step::InString,
                    _ => return err(c, "looking for beginning of object key string"),
                },
                Step::EndTop => match c {
                    _ if is_space(c) => Step::EndTop,
                    _ => return err(c, "after top-level value"),
                },
                Step::EndValue => match end_value_in(&mut stack, c) {
                    Ok(s) => s,
                    Err(e) => return Some(e),
                },
                Step::InString => match c {
                    b'"' => end_value(&stack),
                    b'\\' => Step::InStringEsc,
                    c if c < 0x20 => return err(c, "in string literal"),
                    _ => Step::InString,
                },
                Step::InStringEsc => match c {
                    b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => Step::InString,
                    b'u' => Step::InStringEscU(0),
                    _ => return err(c, "in string escape code"),
                },
                Step::InStringEscU(n) => match c {
                    c if c.is_ascii_hexdigit() => {
                        if n == 3 {
                            Step::InString
                        } else {
                            Step::InStringEscU(n + 1)
                        }
                    }
                    _ => return err(c, "in \\u hexadecimal character escape"),
                },
                Step::Neg => match c {
                    b'0' => Step::Zero,
                    b'1'..=b'9' => Step::One,
                    _ => return err(c, "in numeric literal"),
                },
                Step::One if c.is_ascii_digit() => Step::One,
                Step::One | Step::Zero => match c {
                    b'.' => Step::Dot,
                    b'e' | b'E' => Step::E,
                    _ => {
                        again = true;
                        end_value(&stack)
                    }
                },
                Step::Dot => match c {
                    c if c.is_ascii_digit() => Step::Dot0,
                    _ => return err(c, "after decimal point in numeric literal"),
                },
                Step::Dot0 => match c {
                    c if c.is_ascii_digit() => Step::Dot0,
                    b'e' | b'E' => Step::E,
                    _ => {
                        again = true;
                        end_value(&stack)
                    }
                },
                Step::E if c == b'+' || c == b'-' => Step::ESign,
                Step::E | Step::ESign => match c {
                    c if c.is_ascii_digit() => Step::E0,
                    _ => return err(c, "in exponent of numeric literal"),
                },
                Step::E0 => match c {
                    c if c.is_ascii_digit() => Step::E0,
                    _ => {
                        again = true;
                        end_value(&stack)
                    }
                },
                Step::Literal(word, at) => {
                    if c != word[at] {
                        let name = String::from_utf8_lossy(word);
                        return err(c, &format!("in literal {name} (expecting {})", quote_char(word[at])));
                    }
                    if at + 1 == word.len() { end_value(&stack) } else { Step::Literal(word, at + 1) }
                }
            };
        }
    }
    // Go's `eof`: a number may end the input; anything else unfinished is an unexpected end.
    match step {
        Step::EndTop => None,
        Step::Zero | Step::One | Step::Dot0 | Step::E0 if stack.is_empty() => None,
        _ => Some("unexpected end of JSON input".into()),
    }
}

/// The step after a complete value: the end of the top-level value, or what its container
/// expects next.
fn end_value(stack: &[Parse]) -> Step {
    if stack.is_empty() { Step::EndTop } else { Step::EndValue }
}

/// Go's `stateEndValue` for byte `c`, after a value inside a container.
fn end_value_in(stack: &mut Vec<Parse>, c: u8) -> Result<Step, String> {
    let Some(top) = stack.last().copied() else { return Ok(Step::EndTop) };
    if is_space(c) {
        return Ok(Step::EndValue);
    }
    let err = |context: &str| Err(format!("invalid character {} {context}", quote_char(c)));
    match top {
        Parse::ObjectKey => match c {
            b':' => {
                *stack.last_mut().expect("non-empty") = Parse::ObjectValue;
                Ok(Step::BeginValue)
            }
            _ => err("after object key"),
        },
        Parse::ObjectValue => match c {
            b',' => {
                *stack.last_mut().expect("non-empty") = Parse::ObjectKey;
                Ok(Step::BeginString)
            }
            b'}' => {
                stack.pop();
                Ok(end_value(stack))
            }
            _ => err("after object key:value pair"),
        },
        Parse::ArrayValue => match c {
            b',' => Ok(Step::BeginValue),
            b']' => {
                stack.pop();
                Ok(end_value(stack))
            }
            _ => err("after array element"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_decode_as_gos() {
        let decoded = |text: &str| std_base64(text.as_bytes());
        assert_eq!(decoded("W10="), Ok(b"[]".to_vec()));
        assert_eq!(decoded("W1\r\n0=\n"), Ok(b"[]".to_vec()), "line breaks are skipped");
        assert_eq!(decoded("W11="), Ok(b"[]".to_vec()), "unused bits are ignored");
        assert_eq!(decoded("e30K"), Ok(b"{}\n".to_vec()));
        assert_eq!(decoded(""), Ok(Vec::new()));
        let at = |n: usize| Err(format!("illegal base64 data at input byte {n}"));
        assert_eq!(decoded("W10"), at(0), "a quantum left incomplete: its start");
        assert_eq!(decoded("W1!="), at(2));
        assert_eq!(decoded("W10\n!"), at(4), "counted in the text, line breaks too");
        assert_eq!(decoded("W10=\nW10="), at(5), "nothing after the padding");
        assert_eq!(decoded("W1="), at(3), "a second = is due");
        assert_eq!(decoded("W1=x"), at(2));
        assert_eq!(decoded("W10=W10="), at(4), "nothing after the padding");
        assert_eq!(decoded("W==="), at(1));
        let field = "T.f";
        assert_eq!(bytes(&serde_json::json!([91, 93, null]), field), Ok(vec![91, 93, 0]));
        assert_eq!(bytes(&serde_json::json!([256]), field), Err("json: cannot unmarshal number 256 into Go struct field T.f of type uint8".into()));
        assert_eq!(bytes(&serde_json::json!(["a"]), field), Err("json: cannot unmarshal string into Go struct field T.f of type uint8".into()));
        assert_eq!(bytes(&serde_json::json!({}), field), Err("json: cannot unmarshal object into Go struct field T.f of type []uint8".into()));
    }

    #[test]
    fn gos_messages() {
        let cases: &[(&str, Option<&str>)] = &[
            ("{not json", Some("invalid character 'n' looking for beginning of object key string")),
            ("{\"a\" 1}", Some("invalid character '1' after object key")),
            ("{\"a\":1 \"b\"}", Some("invalid character '\"' after object key:value pair")),
            ("[1 2]", Some("invalid character '2' after array element")),
            ("{\"a\":tru}", Some("invalid character '}' in literal true (expecting 'e')")),
            ("{\"a\":-x}", Some("invalid character 'x' in numeric literal")),
            ("{\"a\":1.}", Some("invalid character '}' after decimal point in numeric literal")),
            ("{\"a\":\"\\q\"}", Some("invalid character 'q' in string escape code")),
            ("{} x", Some("invalid character 'x' after top-level value")),
            ("'a'", Some(r"invalid character '\'' looking for beginning of value")),
            ("{\"a\":", Some("unexpected end of JSON input")),
            ("", Some("unexpected end of JSON input")),
            ("{\"a\":[1,{\"b\":null},[]],\"c\":-1.5e+3} ", None),
            ("12", None),
            ("[]", None),
        ];
        for (input, want) in cases {
            assert_eq!(syntax_error(input.as_bytes()).as_deref(), *want, "{input}");
        }
    }
}
