//! kube's authorization library (k8s.io/apiserver/pkg/cel/library `authz.go`, with its
//! selectors library, on in v1.33): the `authorizer` an admission expression is given, and
//! `authorizer.requestResource`, the check of the request's own resource.
//!
//! `authorizer.path(p)`, `authorizer.group(g)` and `authorizer.serviceAccount(ns, name)`;
//! of a group check `resource(r)`; of a resource check `subresource(s)`, `namespace(ns)`,
//! `name(n)`, `fieldSelector(s)`, `labelSelector(s)`; `check(verb)` of either check, and of
//! the decision it gives `allowed()`, `reason()`, `errored()`, `error()`.
//!
//! A check is decided by whoever gave the expression its `authorizer` ([`Authorize`]), for the
//! user the authorizer is of: the requester, or the service account `serviceAccount` names.
//! When that decision cannot be made while the expression runs (the authorization webhook
//! must be asked first), the check fails the evaluation, and the one who gave the authorizer
//! knows why.

use std::sync::Arc;

use cel::common::types::{STRING_TYPE, Type};
use cel::common::value::CowVal;
use cel::objects::Opaque;
use cel::{DeclarationError, Env, ExecutionError, Value};

use super::library::{answer, subject, values};
use crate::auth::UserInfo;
use crate::authz::{Attributes, Decision};
use crate::selector::{FieldSelector, LabelSelector};

const AUTHORIZER: &str = "kubernetes.authorization.Authorizer";
const PATH_CHECK: &str = "kubernetes.authorization.PathCheck";
const GROUP_CHECK: &str = "kubernetes.authorization.GroupCheck";
const RESOURCE_CHECK: &str = "kubernetes.authorization.ResourceCheck";
const DECISION: &str = "kubernetes.authorization.Decision";

/// kube's cost of one `check` (`library/cost.go`: two fit in an expression's limit).
pub const CHECK_COST: u64 = 350_000;

/// Who decides the checks of an expression's `authorizer`.
pub trait Authorize: Send + Sync + std::fmt::Debug {
    /// The decision on `user` doing `attributes`; `None` when it cannot be made while the
    /// expression runs (the check then fails the evaluation).
    fn authorize(&self, user: &UserInfo, attributes: &Attributes) -> Option<Decision>;
}

/// An authorizer for one user.
#[derive(Clone, Debug)]
struct Principal {
    authority: Arc<dyn Authorize>,
    user: Arc<UserInfo>,
}

impl PartialEq for Principal {
    fn eq(&self, other: &Principal) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.authority), Arc::as_ptr(&other.authority)) && self.user == other.user
    }
}

impl Eq for Principal {}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Authorizer(Principal);

#[derive(Clone, Debug, PartialEq, Eq)]
struct PathCheck {
    principal: Principal,
    path: Arc<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct GroupCheck {
    principal: Principal,
    group: Arc<String>,
}

/// A resource check; its strings are shared, so that a check narrowed copies none.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ResourceCheck {
    of: GroupCheck,
    resource: Arc<String>,
    subresource: Arc<String>,
    namespace: Arc<String>,
    name: Arc<String>,
    field_selector: Arc<String>,
    label_selector: Arc<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct DecisionValue(Decision);

macro_rules! opaque {
    ($($t:ty => $name:expr),* $(,)?) => {
        $(impl Opaque for $t {
            fn runtime_type_name(&self) -> &str {
                $name
            }
        })*
    };
}

opaque!(Authorizer => AUTHORIZER, PathCheck => PATH_CHECK, GroupCheck => GROUP_CHECK, ResourceCheck => RESOURCE_CHECK, DecisionValue => DECISION);

/// `authorizer`: checks of what `user` may do, decided by `authority`.
pub fn authorizer(authority: Arc<dyn Authorize>, user: UserInfo) -> Value {
    Value::Opaque(Arc::new(Authorizer(Principal { authority, user: Arc::new(user) })))
}

/// The resource a request is for, as `authorizer.requestResource` checks it.
pub struct RequestResource<'a> {
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
}

/// `authorizer.requestResource`: the check of `user` doing a verb to the request's resource.
pub fn request_resource(authority: Arc<dyn Authorize>, user: UserInfo, r: RequestResource<'_>) -> Value {
    let text = |s: &str| Arc::new(s.to_string());
    let of = GroupCheck { principal: Principal { authority, user: Arc::new(user) }, group: text(r.group) };
    Value::Opaque(Arc::new(ResourceCheck {
        of,
        resource: text(r.resource),
        subresource: text(r.subresource),
        namespace: text(r.namespace),
        name: text(r.name),
        field_selector: text(""),
        label_selector: text(""),
    }))
}

type Function = for<'b, 'v> fn(Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError>;

/// Registers the library on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    let t = Type::new_opaque_type;
    let members: [(&str, &str, &str, Vec<Type>, Function); 15] = [
        ("path", "authorizer_path", AUTHORIZER, vec![STRING_TYPE], path),
        ("group", "authorizer_group", AUTHORIZER, vec![STRING_TYPE], group),
        ("serviceAccount", "authorizer_serviceaccount", AUTHORIZER, vec![STRING_TYPE, STRING_TYPE], service_account),
        ("resource", "groupcheck_resource", GROUP_CHECK, vec![STRING_TYPE], resource),
        ("subresource", "resourcecheck_subresource", RESOURCE_CHECK, vec![STRING_TYPE], subresource),
        ("namespace", "resourcecheck_namespace", RESOURCE_CHECK, vec![STRING_TYPE], namespace),
        ("name", "resourcecheck_name", RESOURCE_CHECK, vec![STRING_TYPE], name),
        ("fieldSelector", "authorizer_fieldselector", RESOURCE_CHECK, vec![STRING_TYPE], field_selector),
        ("labelSelector", "authorizer_labelselector", RESOURCE_CHECK, vec![STRING_TYPE], label_selector),
        ("check", "pathcheck_check", PATH_CHECK, vec![STRING_TYPE], check_path),
        ("check", "resourcecheck_check", RESOURCE_CHECK, vec![STRING_TYPE], check_resource),
        ("allowed", "decision_allowed", DECISION, vec![], allowed),
        ("reason", "decision_reason", DECISION, vec![], reason),
        ("errored", "decision_errored", DECISION, vec![], errored),
        ("error", "decision_error", DECISION, vec![], error),
    ];
    for (function, id, target, args, f) in members {
        env.add_member_overload(function, id, t(target), args, f)?;
    }
    Ok(())
}

/// The receiver of `function`, of the type `T`.
fn receiver<T: Opaque + Clone>(function: &str, v: &Value) -> Result<T, ExecutionError> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<T>().cloned().ok_or_else(|| ExecutionError::function_error(function, "no such overload")),
        _ => Err(ExecutionError::function_error(function, "no such overload")),
    }
}

fn wrap<'b, 'v>(o: impl Opaque) -> Result<CowVal<'b, 'v>, ExecutionError> {
    answer(Value::Opaque(Arc::new(o)))
}

/// A function's receiver of type `T` and its string argument.
fn with_string<T: Opaque + Clone>(function: &str, args: Vec<CowVal<'_, '_>>) -> Result<(T, Arc<String>), ExecutionError> {
    let [target, s] = values(args)?;
    Ok((receiver(function, &target)?, subject(function, &s)?))
}

fn path<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (Authorizer(principal), path) = with_string("path", args)?;
    if path.trim().is_empty() {
        return Err(ExecutionError::function_error("path", "path must not be empty"));
    }
    wrap(PathCheck { principal, path })
}

fn group<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (Authorizer(principal), group) = with_string("group", args)?;
    wrap(GroupCheck { principal, group })
}

/// The user kube makes of a service account (`ServiceAccountInfo.UserInfo`): its name and
/// the service account groups, as the authenticator has not added `system:authenticated`.
fn service_account<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [target, namespace, name] = values(args)?;
    let Authorizer(principal) = receiver("serviceAccount", &target)?;
    let (namespace, name) = (subject("serviceAccount", &namespace)?, subject("serviceAccount", &name)?);
    if !crate::validation::names::dns1123_subdomain(&name).is_empty() {
        return Err(ExecutionError::function_error("serviceAccount", "Invalid service account name"));
    }
    if !crate::validation::names::dns1123_label(&namespace).is_empty() {
        return Err(ExecutionError::function_error("serviceAccount", "Invalid service account namespace"));
    }
    let user = UserInfo {
        name: format!("system:serviceaccount:{namespace}:{name}"),
        groups: vec!["system:serviceaccounts".to_string(), format!("system:serviceaccounts:{namespace}")],
        ..UserInfo::default()
    };
    wrap(Authorizer(Principal { authority: principal.authority, user: Arc::new(user) }))
}

fn resource<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (of, resource): (GroupCheck, Arc<String>) = with_string("resource", args)?;
    if resource.trim().is_empty() {
        return Err(ExecutionError::function_error("resource", "resource must not be empty"));
    }
    let empty = || Arc::new(String::new());
    wrap(ResourceCheck { of, resource, subresource: empty(), namespace: empty(), name: empty(), field_selector: empty(), label_selector: empty() })
}

/// A resource check with one of its fields set by `set`.
fn narrowed<'b, 'v>(function: &str, args: Vec<CowVal<'b, 'v>>, set: fn(&mut ResourceCheck, Arc<String>)) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (mut check, value): (ResourceCheck, Arc<String>) = with_string(function, args)?;
    set(&mut check, value);
    wrap(check)
}

fn subresource<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    narrowed("subresource", args, |c, v| c.subresource = v)
}

fn namespace<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    narrowed("namespace", args, |c, v| c.namespace = v)
}

fn name<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    narrowed("name", args, |c, v| c.name = v)
}

fn field_selector<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    narrowed("fieldSelector", args, |c, v| c.field_selector = v)
}

fn label_selector<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    narrowed("labelSelector", args, |c, v| c.label_selector = v)
}

/// The decision on `principal` doing `attributes`.
fn decided<'b, 'v>(principal: &Principal, attributes: &Attributes) -> Result<CowVal<'b, 'v>, ExecutionError> {
    match principal.authority.authorize(&principal.user, attributes) {
        Some(decision) => wrap(DecisionValue(decision)),
        None => Err(ExecutionError::function_error("check", "the authorization webhook is to be asked first")),
    }
}

fn check_path<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (check, verb): (PathCheck, Arc<String>) = with_string("check", args)?;
    let attributes = Attributes { path: check.path.to_string(), resource_request: false, ..Attributes::resource(&verb, "", "", "", "", "") };
    decided(&check.principal, &attributes)
}

/// A resource check's attributes: any version; the selectors that parse (one that does not
/// is left out, as kube leaves it).
fn check_resource<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (c, verb): (ResourceCheck, Arc<String>) = with_string("check", args)?;
    let mut attributes = Attributes::resource(&verb, &c.of.group, &c.resource, &c.subresource, &c.namespace, &c.name);
    attributes.version = "*".to_string();
    attributes.field_selector = FieldSelector::parse(&c.field_selector).unwrap_or_default();
    attributes.label_selector = LabelSelector::parse(&c.label_selector).unwrap_or_default();
    decided(&c.of.principal, &attributes)
}

fn decision(function: &str, args: Vec<CowVal<'_, '_>>) -> Result<Decision, ExecutionError> {
    let [target] = values(args)?;
    receiver::<DecisionValue>(function, &target).map(|d| d.0)
}

fn allowed<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    answer(Value::Bool(decision("allowed", args)?.allowed))
}

fn reason<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    answer(Value::String(Arc::new(decision("reason", args)?.reason)))
}

fn errored<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    answer(Value::Bool(!decision("errored", args)?.error.is_empty()))
}

fn error<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    answer(Value::String(Arc::new(decision("error", args)?.error)))
}
