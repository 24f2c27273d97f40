//! One policy's expressions on one write, with one of its bindings' parameters (kube's
//! `validator.Validate`): the match conditions, then the validations and their message
//! expressions, then the audit annotations, each within kube's cost budgets.
//!
//! The cost charged is what the evaluation cost, counted as it ran, for an expression kapi
//! evaluates directly on the JSON it reads ([`crate::cel::Expression::evaluate_directly`]);
//! for one the interpreter runs (which does not count), the estimate of the expression over
//! the shapes of the values it is given (their sizes), which is never less than what running
//! it costs.

use std::cell::OnceCell;
use std::collections::HashMap;

use super::{Compiled, FailurePolicy, Policy};
use crate::cel::cost::{self, Shape};
use crate::cel::{Bindings, Key, Value};

/// kube's budget of a policy's match conditions (`RuntimeCELCostBudgetMatchConditions`).
const CONDITIONS_BUDGET: u64 = 2_500_000;

/// The longest message a message expression may give (`MaxEvaluatedMessageExpressionSizeBytes`).
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// kube's error when the budget is spent.
pub const OUT_OF_BUDGET: &str = "validation failed due to running out of cost budget, no further validation rules will be run";

/// What the expressions are given on one write (`object`, `oldObject`, `request`,
/// `namespaceObject`, and the `authorizer` when one reads it), read in place by every policy that sees the write alike, with their
/// shapes.
pub struct Inputs<'w> {
    bindings: Bindings<'w>,
    shapes: Vec<(&'static str, Shape<'w>)>,
}

impl<'w> Inputs<'w> {
    /// Each of the four named, with its JSON (`None`: `null`).
    pub fn new(values: [(&'static str, Option<&'w serde_json::Value>); 4]) -> Inputs<'w> {
        let shapes = values.iter().map(|(n, v)| (*n, v.map_or(Shape::Scalar, Shape::of_json))).collect();
        let mut bindings = Bindings::default();
        for (name, v) in values {
            match v {
                Some(json) => bindings.bind_json(name, json),
                None => bindings.bind(name, Value::Null),
            }
        }
        Inputs { bindings, shapes }
    }

    /// Binds the CEL values of `variables` too (the `authorizer`).
    pub fn bind(&mut self, variables: &[(&'static str, Value)]) {
        for (name, value) in variables {
            self.shapes.push((name, Shape::of(value)));
            self.bindings.bind(name, value.clone());
        }
    }
}

/// A denial, or a failed evaluation the failure policy made one.
#[derive(Debug)]
pub struct Decision {
    pub message: String,
    /// The validation's `reason` (`None`: `Invalid`).
    pub reason: Option<&'static str>,
    /// Which validation failed (0 when the policy could not be applied).
    pub index: usize,
}

/// What one evaluation decided: the denials (which the binding's actions apply), the
/// errors of audit annotations (which deny whatever the actions are), and the audit
/// annotations' values (by key, cut to kube's 10 KiB).
#[derive(Debug, Default)]
pub struct Evaluated {
    pub denials: Vec<Decision>,
    pub audit_errors: Vec<String>,
    pub audit_annotations: Vec<(String, String)>,
}

/// kube's limit of an audit annotation's value, in bytes.
const MAX_AUDIT_ANNOTATION_VALUE: usize = 10 * 1024;

/// Why an expression gave no value.
enum Failure {
    /// kube's words for it.
    Error(String),
    OutOfBudget,
}

/// Why an evaluation gave no value, as it happened.
enum Raw {
    Compile(String),
    /// Past the limit of one call.
    Cancelled,
    OutOfBudget,
    Eval(String),
}

/// The variables bound for one evaluation (its own, then the write's), and their shapes (for
/// the cost of an expression the interpreter runs, worked out when one does).
struct Activation<'p, 'w> {
    policy: &'p Policy,
    inputs: &'p Inputs<'w>,
    own: Bindings<'w>,
    /// What `own` binds, but the write's.
    values: Vec<(&'static str, Value)>,
    shapes: OnceCell<Vec<(&'static str, Shape<'w>)>>,
    /// The variables that did not evaluate, by name, with kube's words for why (`fails to
    /// evaluate: ...`); they are left out of `variables`, so that only an expression that
    /// reads one fails for it.
    failed_variables: Vec<(&'p str, String)>,
}

impl<'p, 'w> Activation<'p, 'w> {
    /// `namespaceObject` is bound unless `conditions` (match conditions do not see it);
    /// `params` when the policy has `paramKind`; then each of `variables`, in order.
    fn new(policy: &'p Policy, inputs: &'p Inputs<'w>, params: Option<&Value>, conditions: bool) -> Activation<'p, 'w> {
        let mut values = vec![("variables", Value::Map(HashMap::<Key, Value>::new().into()))];
        if conditions {
            values.push(("namespaceObject", Value::Null));
        }
        if policy.param_kind.is_some() {
            values.push(("params", params.cloned().unwrap_or(Value::Null)));
        }
        let own = Bindings::new(values.iter().cloned());
        let mut a = Activation { policy, inputs, own, values, shapes: OnceCell::new(), failed_variables: Vec::new() };
        a.bind_variables();
        a
    }

    /// Evaluates `variables` in order, each seeing those before it (kube evaluates one when
    /// first read; its error is the error of what reads it).
    fn bind_variables(&mut self) {
        let mut values: HashMap<Key, Value> = HashMap::new();
        for (name, compiled) in &self.policy.variables {
            let mut budget = cost::CALL_LIMIT;
            let why = match self.attempt(compiled, &mut budget) {
                Ok(v) => {
                    values.insert(Key::from(name.as_str()), v);
                    let map = Value::Map(values.clone().into());
                    self.values[0].1 = map.clone();
                    self.shapes = OnceCell::new();
                    self.own.bind("variables", map);
                    continue;
                }
                Err(Raw::Compile(e)) => format!("fails to compile: compilation failed: {e}"),
                Err(Raw::OutOfBudget | Raw::Cancelled) => "fails to evaluate: operation cancelled: actual cost limit exceeded".to_string(),
                Err(Raw::Eval(e)) => format!("fails to evaluate: {e}"),
            };
            self.failed_variables.push((name, why));
        }
    }

    /// The shapes of the variables, own and the write's.
    fn shapes(&self) -> &[(&'static str, Shape<'w>)] {
        self.shapes.get_or_init(|| self.values.iter().map(|(n, v)| (*n, Shape::of(v))).chain(self.inputs.shapes.iter().cloned()).collect())
    }

    /// Evaluates `c`, charging its cost to `budget`; an error in kube's words.
    fn run(&self, c: &Compiled, budget: &mut u64) -> Result<Value, Failure> {
        let source = &c.source;
        self.attempt(c, budget).map_err(|raw| match raw {
            Raw::OutOfBudget => Failure::OutOfBudget,
            Raw::Compile(e) => Failure::Error(format!("compilation error: compilation failed: {e}")),
            Raw::Cancelled => Failure::Error(format!("expression '{source}' resulted in error: operation cancelled: actual cost limit exceeded")),
            // A variable that did not evaluate, read: its own error.
            Raw::Eval(e) => match self.failed_variables.iter().find(|(name, _)| e == format!("no such key: {name}") && c.reads_variable(name)) {
                Some((name, why)) => Failure::Error(format!("expression '{source}' resulted in error: composited variable \"{name}\" {why}")),
                None => Failure::Error(format!("expression '{source}' resulted in error: {e}")),
            },
        })
    }

    /// Evaluates `c`, charging its cost to `budget`: what it cost, when it could be evaluated
    /// directly, else its estimate.
    fn attempt(&self, c: &Compiled, budget: &mut u64) -> Result<Value, Raw> {
        let expression = c.expression.as_ref().map_err(|e| Raw::Compile(e.clone()))?;
        let layers = [&self.own, &self.inputs.bindings];
        let limit = cost::CALL_LIMIT.min(*budget);
        match expression.evaluate_directly(&layers, limit) {
            Some(Ok((value, spent))) => {
                *budget -= spent;
                return Ok(value);
            }
            // It cost more than the budget left, or than the limit of one call.
            Some(Err(())) if limit < cost::CALL_LIMIT => return Err(Raw::OutOfBudget),
            Some(Err(())) => {
                *budget -= cost::CALL_LIMIT;
                return Err(Raw::Cancelled);
            }
            None => {}
        }
        // An evaluation is cancelled once it has cost the limit of one call.
        let estimate = cost::estimate(expression, self.shapes());
        let spent = estimate.min(cost::CALL_LIMIT);
        if spent > *budget {
            return Err(Raw::OutOfBudget);
        }
        *budget -= spent;
        if estimate > cost::CALL_LIMIT {
            return Err(Raw::Cancelled);
        }
        expression.evaluate_in(&layers).map_err(Raw::Eval)
    }
}

/// Whether the policy fails closed on an error.
fn fails_closed(policy: &Policy) -> bool {
    policy.failure_policy != FailurePolicy::Ignore
}

/// The match conditions (kube's `matchconditions.Matcher`): `Ok(false)` when one is false (the
/// policy is skipped), the errors of the others when none is (a denial if the policy fails
/// closed, else skipped too).
pub(super) fn conditions(policy: &Policy, inputs: &Inputs<'_>, params: Option<&Value>) -> Result<bool, String> {
    if policy.conditions.is_empty() {
        return Ok(true);
    }
    let activation = Activation::new(policy, inputs, params, true);
    let mut budget = CONDITIONS_BUDGET;
    let mut errors = Vec::new();
    for c in &policy.conditions {
        match activation.run(c, &mut budget) {
            Ok(Value::Bool(true)) => {}
            Ok(Value::Bool(false)) => return Ok(false),
            Ok(other) => {
                errors.push(format!("expression '{}' resulted in error: no such overload: expected bool, got {}", c.source, crate::cel::type_name(&other)))
            }
            Err(Failure::OutOfBudget) => return if fails_closed(policy) { Err(OUT_OF_BUDGET.into()) } else { Ok(false) },
            Err(Failure::Error(e)) => errors.push(e),
        }
    }
    match errors.is_empty() {
        true => Ok(true),
        false if fails_closed(policy) => Err(crate::authz::rbac::aggregate(&errors)),
        false => Ok(false),
    }
}

/// A mutating policy's mutation `m` on one write with one parameter: its result, within a
/// budget of its own (kube gives each mutation `RuntimeCELCostBudget`); an error in kube's
/// words.
pub fn mutation(policy: &Policy, inputs: &Inputs<'_>, params: Option<&Value>, m: &Compiled) -> Result<Value, String> {
    let activation = Activation::new(policy, inputs, params, false);
    let mut budget = cost::OBJECT_BUDGET;
    activation.run(m, &mut budget).map_err(|f| match f {
        Failure::OutOfBudget => OUT_OF_BUDGET.to_string(),
        Failure::Error(e) => e,
    })
}

/// The policy on one write with one parameter (`params`: `None` for a binding without one).
pub fn evaluate(policy: &Policy, inputs: &Inputs<'_>, params: Option<&Value>) -> Evaluated {
    let mut out = Evaluated::default();
    let closed = fails_closed(policy);
    let fail = |out: &mut Evaluated, message: String, index: usize| {
        if closed {
            out.denials.push(Decision { message, reason: None, index });
        }
    };
    match conditions(policy, inputs, params) {
        Ok(true) => {}
        Ok(false) => return out,
        Err(why) => {
            out.denials.push(Decision { message: why, reason: None, index: 0 });
            return out;
        }
    }
    let activation = Activation::new(policy, inputs, params, false);
    let mut budget = cost::OBJECT_BUDGET;
    let mut results = Vec::new();
    for v in &policy.validations {
        match activation.run(&v.expression, &mut budget) {
            Ok(value) => results.push(Ok(value == Value::Bool(true))),
            Err(Failure::OutOfBudget) => {
                fail(&mut out, OUT_OF_BUDGET.into(), results.len());
                return out;
            }
            Err(Failure::Error(e)) => results.push(Err(e)),
        }
    }
    let mut messages_spent = false;
    for (index, (v, result)) in policy.validations.iter().zip(results).enumerate() {
        let message = match (&v.message_expression, messages_spent) {
            (Some(m), false) => match activation.run(m, &mut budget) {
                Ok(Value::String(s)) => Some(s.trim().to_string()).filter(|s| !s.is_empty() && s.len() <= MAX_MESSAGE_BYTES && !s.contains('\n')),
                Err(Failure::OutOfBudget) => {
                    messages_spent = true;
                    None
                }
                _ => None,
            },
            _ => None,
        };
        match result {
            Err(e) => fail(&mut out, e, index),
            _ if messages_spent && v.message_expression.is_some() => fail(&mut out, format!("failed messageExpression: {OUT_OF_BUDGET}"), index),
            Ok(true) => {}
            Ok(false) => {
                let written = v.message.as_deref().map(str::trim).filter(|m| !m.is_empty()).map(str::to_string);
                let message = message.or(written).unwrap_or_else(|| format!("failed expression: {}", v.expression.source.trim()));
                out.denials.push(Decision { message, reason: v.reason, index });
            }
        }
    }
    let mut budget = cost::OBJECT_BUDGET;
    for (key, value) in &policy.audit_annotations {
        match activation.run(value, &mut budget) {
            Ok(Value::String(s)) => {
                let cut = (0..=s.len().min(MAX_AUDIT_ANNOTATION_VALUE)).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
                out.audit_annotations.push((key.clone(), s[..cut].to_string()));
            }
            Ok(Value::Null) => {}
            Ok(other) => out.audit_errors.push(format!(
                "valueExpression '{}' resulted in unsupported return type: {}. Return type must be either string or null.",
                value.source,
                crate::cel::type_name(&other)
            )),
            Err(Failure::OutOfBudget) if closed => out.audit_errors.push(OUT_OF_BUDGET.into()),
            Err(Failure::Error(e)) if closed => out.audit_errors.push(e),
            Err(_) => {}
        }
    }
    out
}
