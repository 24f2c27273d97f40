//! A resource's rules: kube-apiserver's per-resource strategies (`RESTCreateStrategy`,
//! `RESTUpdateStrategy`, `RESTDeleteStrategy`, the table printer and the selectable fields).

use std::borrow::Cow;

use jiff::Timestamp;
use serde_json::Value;

use crate::meta;
use crate::status::{ApiError, FieldError, GroupResource};
use crate::table::Column;

/// The name of a field a field selector may name: a built-in kind's, or one a CRD declares.
pub type FieldName = Cow<'static, str>;

/// A built-in kind's selectable field.
pub const fn field(name: &'static str) -> FieldName {
    Cow::Borrowed(name)
}

/// What happens when an object is deleted (`BeforeDelete` and graceful deletion).
#[derive(Clone, Debug, PartialEq)]
pub enum GracefulDelete {
    /// Delete now.
    Immediately,
    /// Mark the object with `deletionTimestamp = now + seconds` and let its owner finish.
    After(i64),
}

/// A unique value an object takes from a shared pool before it is written (a service's cluster
/// IP, its node ports). The value is taken by creating `<pool>/<value>` in storage, so two
/// objects never hold the same one; the key is removed when the object goes.
#[derive(Clone, Debug)]
pub struct Claim {
    /// The storage prefix of the pool, under `--etcd-prefix` (`ipaddresses`).
    pub pool: &'static str,
    pub candidates: Candidates,
    /// What the pool key holds; an object (with `metadata`) gets the value as its name, a uid
    /// and a creation time, so that the pool is served as a resource (`ipaddresses`).
    pub record: Value,
    /// The error when a requested value is taken, or no candidate is free.
    pub taken: ApiError,
}

/// The values a claim may take, tried in order.
#[derive(Clone, Debug)]
pub enum Candidates {
    /// Exactly this value (the client asked for it).
    Fixed(String),
    /// `count` consecutive integers from `first`, starting at `first + start` and wrapping
    /// around, each written by `format` (an IPv4 address, a port).
    Range { first: u64, count: u64, start: u64, format: fn(u64) -> String },
}

impl Candidates {
    pub fn len(&self) -> u64 {
        match self {
            Candidates::Fixed(_) => 1,
            Candidates::Range { count, .. } => *count,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, i: u64) -> Option<String> {
        match self {
            Candidates::Fixed(v) => (i == 0).then(|| v.clone()),
            Candidates::Range { first, count, start, format } => (i < *count).then(|| format(first + (start + i) % count)),
        }
    }
}

/// What a review resource may consult.
pub struct ReviewContext<'a> {
    pub user: &'a crate::auth::UserInfo,
    pub authenticator: &'a crate::auth::Authenticator,
    /// The authorizer chain over what it read as the request started (a decision the
    /// authorization webhook must make first is kept for the request to ask).
    pub decider: &'a crate::authz::Decider<'a>,
}

/// How a kind's create and update treat `status` and `metadata.generation` (the common shapes
/// of kube's `PrepareForCreate` / `PrepareForUpdate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifecycle {
    /// Neither status nor generation is touched (kube's generic behaviour).
    Plain,
    /// `generation` starts at 1 and grows when the named top-level field changes; no status.
    Generation(&'static str),
    /// Status starts empty and updates of the object keep it; no generation.
    Status,
    /// Status as above, and generation as for `Generation("spec")`.
    StatusAndGeneration,
}

impl Lifecycle {
    /// `Status = XStatus{}`: status starts as its zero value (`{"replicas":0}` for a
    /// ReplicaSet, `{}` for most).
    pub fn prepare_for_create(self, obj: &mut Value) {
        if matches!(self, Lifecycle::Status | Lifecycle::StatusAndGeneration) {
            let zero = zero_status(obj);
            if let Some(m) = obj.as_object_mut() {
                m.insert("status".into(), zero);
            }
        }
        if matches!(self, Lifecycle::Generation(_) | Lifecycle::StatusAndGeneration) {
            meta::set_meta(obj, "generation", Value::from(1));
        }
    }

    pub fn prepare_for_update(self, new: &mut Value, old: &Value) {
        if matches!(self, Lifecycle::Status | Lifecycle::StatusAndGeneration) {
            keep_status(new, old);
        }
        match self {
            Lifecycle::Generation(field) => bump_generation_when_changed(new, old, field),
            Lifecycle::StatusAndGeneration => bump_generation_when_changed(new, old, "spec"),
            Lifecycle::Plain | Lifecycle::Status => {}
        }
    }
}

/// An object's `autoscaling/v1` Scale (`Strategy::scale_of`).
pub struct ScaleOf {
    pub scale: Value,
    /// Whether the object has the replicas the Scale shows (a custom resource's may be unset:
    /// its Scale shows 0, and a read of it is refused).
    pub replicas_set: bool,
    /// Where the replicas are, as kube's messages name it (`.spec.replicas`).
    pub replicas_path: String,
}

/// A resource's rules. Every method has kube's generic behaviour as its default.
pub trait Strategy: Send + Sync {
    /// How its objects are typed for managed fields and server-side apply.
    fn typing(&self) -> crate::ssa::Typing<'_> {
        crate::ssa::Typing::BuiltIn
    }

    /// Whether storage holds objects as they are served; `false` where the two conversions
    /// below change them. The watch cache then serves the stored bytes without decoding them.
    fn stored_as_served(&self) -> bool {
        true
    }

    /// The object as served, from what storage holds (kinds stored as another version).
    fn served_from_stored(&self, stored: Value) -> Value {
        stored
    }

    /// What storage holds for an object as served, where it differs from the object itself.
    fn stored_from_served(&self, _served: &Value) -> Option<Value> {
        None
    }

    /// Where a webhook converts objects between the served and the stored version (a CRD's
    /// `Webhook` conversion): the webhook and the stored apiVersion. Objects of another
    /// apiVersion than the one asked for go through it (see
    /// [`apiextensions::conversion`](crate::apiextensions::conversion)) before the two
    /// conversions above, which then only prune and default.
    fn conversion_webhook(&self) -> Option<(&std::sync::Arc<crate::apiextensions::ConversionWebhook>, String)> {
        None
    }

    /// For kinds that carry their own schema (custom resources): drops from an incoming object
    /// the fields the schema does not know and says which; `None` where the kind's built-in
    /// definition decides.
    fn prune_unknown(&self, _obj: &mut Value) -> Option<Vec<String>> {
        None
    }

    /// Defaults applied to objects written by clients (`SetDefaults_<Kind>`).
    fn default(&self, _obj: &mut Value) {}

    /// How create and update treat status and generation, for the two methods below.
    fn lifecycle(&self) -> Lifecycle {
        Lifecycle::Plain
    }

    /// `PrepareForCreate`: reset what a client may not set on create (usually status).
    fn prepare_for_create(&self, obj: &mut Value) {
        self.lifecycle().prepare_for_create(obj);
    }

    /// `Validate` on create: kind-specific checks (object metadata is checked generically).
    fn validate(&self, _obj: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// How `metadata.name` is checked.
    fn name_check(&self) -> crate::validation::NameCheck {
        crate::validation::dns1123_subdomain
    }

    /// Changes that need the object's final name and uid, made just before validation
    /// (jobs derive their selector from their uid).
    fn finalize_create(&self, _obj: &mut Value) {}

    /// What a create records of who asked for it (certificate signing requests keep their
    /// requester), after `prepare_for_create`.
    fn record_requester(&self, _obj: &mut Value, _user: &crate::auth::UserInfo) {}

    /// `PrepareForUpdate` of the main resource: keep status, bump generation.
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        self.lifecycle().prepare_for_update(new, old);
    }

    /// `ValidateUpdate`: by default the create checks again.
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        self.validate(new)
    }

    /// `PrepareForUpdate` of a subresource: `status` may change only status.
    fn prepare_for_subresource_update(&self, subresource: &str, new: &mut Value, old: &Value) {
        if subresource == "status" {
            copy_all_but_status(new, old);
        }
    }

    /// `ValidateUpdate` of a subresource.
    fn validate_subresource_update(&self, _subresource: &str, _new: &Value, _old: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// Whether an update (PUT, apply) of a missing object creates it.
    fn allow_create_on_update(&self) -> bool {
        false
    }

    /// Whether an update without `metadata.resourceVersion` is allowed (last write wins).
    fn allow_unconditional_update(&self) -> bool {
        true
    }

    /// `BeforeDelete` for graceful deletion; `grace` is the `gracePeriodSeconds` asked for.
    fn graceful_delete(&self, _obj: &Value, _grace: Option<i64>) -> GracefulDelete {
        GracefulDelete::Immediately
    }

    /// Changes made to an object that starts being deleted (namespaces turn `Terminating`).
    fn prepare_for_delete(&self, _obj: &mut Value, _now: Timestamp) {}

    /// Whether this kind's first delete is its own, as kube's namespace and CRD registries
    /// delete: it sets the deletion timestamp and what [`Strategy::prepare_for_delete`] sets,
    /// with no grace period and no generation bump.
    fn marks_own_delete(&self) -> bool {
        false
    }

    /// The propagation policy of deletes that name none (`DefaultGarbageCollectionPolicy`).
    fn default_propagation(&self) -> &'static str {
        "Background"
    }

    /// A create on a subresource that changes the parent object (`pods/binding`).
    fn subresource_create(&self, subresource: &str, _parent: &mut Value, _body: &Value, _now: Timestamp) -> Result<(), ApiError> {
        Err(ApiError::method_not_supported(&GroupResource::new("", subresource), "create"))
    }

    /// The answer of a review resource (`SelfSubjectAccessReview` and friends) to a create.
    fn review(&self, obj: Value, _ctx: &ReviewContext) -> Result<Value, ApiError> {
        Ok(obj)
    }

    /// The `autoscaling/v1` Scale of an object with a `/scale` subresource.
    fn scale_of(&self, _obj: &Value) -> Result<ScaleOf, ApiError> {
        Err(ApiError::internal("no scale subresource"))
    }

    /// Writes a Scale's replicas into the object: `spec.replicas`, refused below 0 as kube's
    /// `ValidateScale` refuses it (custom resources: their own path, their own validation).
    fn set_scale_replicas(&self, obj: &mut Value, replicas: i64) -> Result<(), ApiError> {
        if replicas < 0 {
            return Err(ApiError::invalid(
                &crate::status::GroupKind { group: "autoscaling".into(), kind: "Scale".into() },
                meta::name(obj),
                &[FieldError::invalid("spec.replicas", Value::from(replicas), "must be greater than or equal to 0")],
            ));
        }
        meta::object_at(obj, &["spec"]).insert("replicas".into(), Value::from(replicas));
        Ok(())
    }

    /// The values a new object must take from shared pools; the rng picks where to start.
    fn claims(&self, _obj: &Value, _rng: &mut crate::rand::Rng) -> Result<Vec<Claim>, ApiError> {
        Ok(Vec::new())
    }

    /// Writes the values the claims got into the object, in claim order.
    fn grant(&self, _obj: &mut Value, _values: &[String]) {}

    /// The pool keys (`<pool>/<value>`) an object holds, released when it is deleted.
    fn held(&self, _obj: &Value) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// The table columns of `kubectl get`.
    fn columns(&self) -> &'static [Column] {
        crate::table::DEFAULT_COLUMNS
    }

    /// The table's column definitions, from the columns above (kinds whose columns are known
    /// only at run time, custom resources', give them here).
    fn column_definitions(&self) -> Vec<Value> {
        self.columns().iter().map(Column::to_json).collect()
    }

    /// One table row's cells, for the columns above.
    fn row(&self, obj: &Value, _now: Timestamp) -> Vec<Value> {
        vec![Value::from(meta::name(obj)), Value::from(crate::table::created_at(obj))]
    }

    /// Its kind's and list kind's OpenAPI definitions, where the built-in schema has none
    /// (custom resources).
    fn openapi_definitions(&self) -> Option<&crate::apiextensions::KindDefinitions> {
        None
    }

    /// The fields a field selector may name, beyond `metadata.name` and `metadata.namespace`.
    fn selectable_fields(&self) -> &[FieldName] {
        &[]
    }

    /// Where in the object a selectable field's value is (a dotted path): the field's own name
    /// unless kube names it otherwise.
    fn field_path<'a>(&self, field: &'a str) -> &'a str {
        field
    }

    /// The value of a selectable field, none where the object has nothing or null there. It
    /// reads only under the field's path (the watch cache gives it an object with just those
    /// parts of the stored one).
    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        let path: Vec<&str> = self.field_path(field).split('.').collect();
        meta::at(obj, &path).and_then(|v| match v {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        })
    }
}

/// Every field of `old` except `status` is copied into `new` (status updates may only change
/// status); metadata keeps `new`'s managedFields and resourceVersion (`ResetObjectMetaForStatus`).
pub fn copy_all_but_status(new: &mut Value, old: &Value) {
    let (Some(n), Some(o)) = (new.as_object_mut(), old.as_object()) else { return };
    let status = n.remove("status");
    let new_meta = n.remove("metadata");
    n.clear();
    for (k, v) in o {
        if k != "status" {
            n.insert(k.clone(), v.clone());
        }
    }
    if let Some(s) = status {
        n.insert("status".into(), s);
    }
    if let (Some(Value::Object(nm)), Some(Value::Object(om))) = (new_meta, n.get_mut("metadata")) {
        for key in ["managedFields", "resourceVersion"] {
            match nm.get(key) {
                Some(v) => om.insert(key.into(), v.clone()),
                None => om.remove(key),
            };
        }
    }
}

/// `new.status = old.status` (updates of the main resource may not change status).
pub fn keep_status(new: &mut Value, old: &Value) {
    let Some(n) = new.as_object_mut() else { return };
    match old.get("status") {
        Some(s) => n.insert("status".into(), s.clone()),
        None => n.remove("status"),
    };
}

/// `metadata.generation = old + 1` when `spec` changed (the rule of most kinds with a spec).
pub fn bump_generation_on_spec_change(new: &mut Value, old: &Value) {
    bump_generation_when_changed(new, old, "spec");
}

/// `metadata.generation = old + 1` when the top-level `field` changed.
pub fn bump_generation_when_changed(new: &mut Value, old: &Value, field: &str) {
    let g = meta::generation(old).max(1);
    let changed = new.get(field) != old.get(field);
    meta::set_meta(new, "generation", Value::from(if changed { g + 1 } else { g }));
}

/// The zero value of an object's status, from its kind's definition.
fn zero_status(obj: &Value) -> Value {
    let s = crate::schema::schema();
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    match s.for_gvk(group, version, kind).and_then(|d| d.properties.get("status")).map(|p| &p.ty) {
        Some(crate::schema::Type::Object(status)) => s.zero_value(status),
        _ => Value::Object(Default::default()),
    }
}
