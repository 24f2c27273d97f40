//! GET and LIST of componentstatuses: storage's health, then the components' `/healthz`
//! probed by the shell, answered as kube's componentstatus REST answers (nothing is stored).

use std::sync::Arc;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::Stage;
use crate::cache::table_of;
use crate::catalog::Resource;
use crate::codec::negotiate::Target;
use crate::codec::{self, View};
use crate::meta;
use crate::pipeline::query::Query;
use crate::pipeline::respond::{Head, content_type};
use crate::pipeline::{Effect, ProbeOutcome, RequestInfo, RequestMachine};
use crate::resources::componentstatuses;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::table;

impl RequestMachine {
    pub(super) fn component_statuses(&mut self, res: Arc<Resource>, info: &RequestInfo, query: &Query) -> Result<(), ApiError> {
        let list = info.verb == "list";
        let output = self.output(&res, if list { Target::List } else { Target::Object }, query)?;
        self.out.push_back(Effect::Health);
        self.stage = Stage::Components { res, name: (!list).then(|| info.name.clone()), output, storage: None };
        Ok(())
    }

    pub(super) fn components_probed(&mut self, outcomes: &[ProbeOutcome], now: Timestamp) {
        let Stage::Components { res, name, output, storage } = std::mem::replace(&mut self.stage, Stage::Done) else { return };
        let all = componentstatuses::statuses(&storage.unwrap_or(Ok(())), outcomes);
        if let Some(name) = name {
            return match all.iter().find(|s| meta::name(s) == name) {
                Some(obj) => self.respond_object(&res, obj, output, 200, "", now),
                None => self.fail_as(&ApiError::not_found(&res.info.group_resource(), &name), output.format),
            };
        }
        let query = Query::parse(&self.req.query);
        let labels = LabelSelector::parse(query.get("labelSelector").unwrap_or("")).map_err(ApiError::bad_request);
        let fields = FieldSelector::parse(query.get("fieldSelector").unwrap_or("")).map_err(ApiError::bad_request);
        let (labels, fields) = match (labels, fields) {
            (Ok(l), Ok(f)) => (l, f),
            (Err(e), _) | (_, Err(e)) => return self.fail_as(&e, output.format),
        };
        let items: Vec<Value> =
            all.into_iter().filter(|s| labels.matches(&meta::labels(s)) && fields.matches(&[("metadata.name", meta::name(s).to_string())])).collect();
        let body = match output.view {
            View::Table(include) => table_of(&res, &items, include, true, "", now),
            View::Metadata => json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": {},
                "items": items.iter().map(table::partial_metadata).collect::<Vec<_>>()}),
            View::Object => json!({"kind": "ComponentStatusList", "apiVersion": "v1", "metadata": {}, "items": items}),
        };
        match codec::encode(&body, if matches!(output.view, View::Table(_)) { codec::Format::Json } else { output.format }) {
            Ok(b) => self.respond(Head::new(200, &content_type(output, true)), b),
            Err(e) => self.fail_as(&ApiError::internal(e), output.format),
        }
    }
}
