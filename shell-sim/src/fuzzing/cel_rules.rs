//! Fuzzed CEL validation rules: an expression (built from CEL's syntax, kube's functions and a
//! schema's field names, or any text) as a rule and message expression at the root of a
//! generated schema, checked as a CRD's rules are checked (compiled, costed) and, where the
//! check accepts it, run on generated objects of the schema, as a create and as an update.
//! Each run is charged against kube's cost limits. No input may panic, and an accepted rule
//! must finish (libFuzzer's time limit per input).

use arbitrary::Unstructured;
use kapi_core::apiextensions::{Structural, check_rules};
use serde_json::json;

use super::schemas::{Result, schema, value};

/// Expressions of no parts.
const ATOMS: [&str; 16] = [
    "self",
    "oldSelf",
    "self.a",
    "self.b",
    "self.name",
    "self.spec",
    "x",
    "1",
    "-2.5",
    "'a'",
    "b'z'",
    "[1, 2, 3]",
    "{'a': 1}",
    "true",
    "null",
    "self.metadata.name",
];
/// Expressions of parts, each `#` one.
pub(super) const FORMS: [&str; 44] = [
    "# + #",
    "# - #",
    "# * #",
    "# / #",
    "# % #",
    "# == #",
    "# != #",
    "# < #",
    "# >= #",
    "# && #",
    "# || #",
    "!#",
    "-#",
    "# ? # : #",
    "#[#]",
    "# in #",
    "#.all(x, #)",
    "#.exists(x, #)",
    "#.exists_one(x, #)",
    "#.map(x, #)",
    "#.filter(x, #)",
    "has(#.a)",
    "size(#)",
    "#.matches(#)",
    "#.contains(#)",
    "#.startsWith(#)",
    "#.split(#)",
    "#.lowerAscii()",
    "#.replace(#, #)",
    "#.substring(#)",
    "#.indexOf(#)",
    "#.join(#)",
    "#.isSorted()",
    "#.sum()",
    "#.min()",
    "#.max()",
    "#.find(#)",
    "#.findAll(#, #)",
    "sets.contains(#, #)",
    "string(#)",
    "int(#)",
    "timestamp(#)",
    "#.?a",
    "optional.of(#).orValue(#)",
];
const MAX_DEPTH: u32 = 5;

/// An expression of [`FORMS`] over `atoms`.
pub(super) fn expression(u: &mut Unstructured, atoms: &[&str], depth: u32) -> Result<String> {
    if depth >= MAX_DEPTH || u.ratio(1, 3)? {
        return Ok(u.choose(atoms)?.to_string());
    }
    let form = *u.choose(&FORMS)?;
    let mut out = String::new();
    for (i, part) in form.split('#').enumerate() {
        if i > 0 {
            out.push_str(&expression(u, atoms, depth + 1)?);
        }
        out.push_str(part);
    }
    Ok(out)
}

/// A schema with a rule at its root, and two objects of it.
pub fn cel_rules(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(mut schema) = schema(&mut u, 0) else { return };
    let (Ok(rule), Ok(message)) = (text(&mut u), text(&mut u)) else { return };
    let mut entry = json!({"rule": rule, "messageExpression": message});
    if u.ratio(1, 4).unwrap_or(false) {
        entry["optionalOldSelf"] = json!(true);
    }
    schema["x-kubernetes-validations"] = json!([entry]);
    let (Ok(new), Ok(old)) = (value(&mut u, &schema, 0), value(&mut u, &schema, 0)) else { return };
    if !check_rules(&schema, "schema").is_empty() {
        return;
    }
    let structural = Structural::read(&schema);
    structural.validate_rules(&new, None);
    structural.validate_rules(&new, Some(&old));
}

/// An expression: mostly built, now and then any text.
fn text(u: &mut Unstructured) -> Result<String> {
    if u.ratio(1, 5)? { Ok(u.arbitrary::<&str>()?.to_string()) } else { expression(u, &ATOMS, 0) }
}
