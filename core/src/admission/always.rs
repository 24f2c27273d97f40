//! AlwaysAdmit and AlwaysDeny (off by default, deprecated in kube: tests only): the first
//! admits everything, the second refuses every write with kube's 403, `<resource> "<name>" is
//! forbidden: admission control is denying all modifications`.

use serde_json::Value;

use super::{Attributes, Operation, Plugin};
use crate::rand::Rng;
use crate::status::ApiError;

#[derive(Debug)]
pub struct AlwaysAdmit;

impl Plugin for AlwaysAdmit {
    fn name(&self) -> &'static str {
        "AlwaysAdmit"
    }

    fn handles(&self, _op: Operation) -> bool {
        false
    }
}

#[derive(Debug)]
pub struct AlwaysDeny;

const DENIED: &str = "admission control is denying all modifications";

impl Plugin for AlwaysDeny {
    fn name(&self) -> &'static str {
        "AlwaysDeny"
    }

    fn handles(&self, _op: Operation) -> bool {
        true
    }

    fn admit(&self, a: &Attributes, _obj: Option<&mut Value>, _rng: &mut Rng) -> Result<(), ApiError> {
        Err(a.forbidden(DENIED))
    }

    fn validate(&self, a: &Attributes, _obj: Option<&Value>, _warnings: &mut Vec<String>) -> Result<(), ApiError> {
        Err(a.forbidden(DENIED))
    }
}
