//! The collections the simulated clients work on: configmaps; horizontalpodautoscalers, one
//! stored object served at two versions (autoscaling/v2, its storage version, and v1 converted
//! on the way in and out), so that every invariant also holds across a conversion, in LISTs,
//! watches and writes alike; and the widgets of a CustomResourceDefinition made at the start,
//! served at two versions too (v1 stored, v1beta1 converted by its `apiVersion` only), so that
//! they hold for resources of a catalog that changed at run time.

use serde_json::{Value, json};

use super::rng::SimRng;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    ConfigMaps,
    HpaV2,
    HpaV1,
    WidgetsV1,
    WidgetsV1beta1,
}

/// The group of the widgets' CRD.
pub const WIDGETS_GROUP: &str = "sim.kapi.dev";

impl Kind {
    pub const ALL: [Kind; 5] = [Kind::ConfigMaps, Kind::HpaV2, Kind::HpaV1, Kind::WidgetsV1, Kind::WidgetsV1beta1];

    /// The widgets' CustomResourceDefinition, namespaced, with a schema that keeps what it is
    /// given.
    pub fn widgets_crd() -> Value {
        let part = json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "count": {"type": "integer"}}});
        let spec = json!({"type": "object", "properties": {"size": {"type": "integer"}, "by": {"type": "string"},
            "parts": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "items": part}}});
        let schema = json!({"openAPIV3Schema": {"type": "object",
            "properties": {"spec": spec, "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}});
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": format!("widgets.{WIDGETS_GROUP}")},
            "spec": {"group": WIDGETS_GROUP, "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": schema},
                    {"name": "v1beta1", "served": true, "storage": false, "schema": schema}]}})
    }

    /// Where its objects are stored, under `/registry/` (a custom resource's under its group).
    pub fn storage_prefix(self) -> String {
        match self {
            Kind::WidgetsV1 | Kind::WidgetsV1beta1 => format!("{WIDGETS_GROUP}/widgets"),
            _ => self.resource().to_string(),
        }
    }

    /// The version of the widgets' CRD it is served at; `None` for a built-in kind.
    pub fn crd_version(self) -> Option<&'static str> {
        match self {
            Kind::WidgetsV1 => Some("v1"),
            Kind::WidgetsV1beta1 => Some("v1beta1"),
            _ => None,
        }
    }

    /// Whether an update without a resourceVersion is allowed (custom resources: no, as kube).
    pub fn updates_unconditionally(self) -> bool {
        !matches!(self, Kind::WidgetsV1 | Kind::WidgetsV1beta1)
    }

    /// The kind of its objects.
    pub fn kind(self) -> &'static str {
        match self {
            Kind::ConfigMaps => "ConfigMap",
            Kind::HpaV2 | Kind::HpaV1 => "HorizontalPodAutoscaler",
            Kind::WidgetsV1 | Kind::WidgetsV1beta1 => "Widget",
        }
    }

    /// The start of its objects' names.
    pub fn stem(self) -> &'static str {
        match self {
            Kind::ConfigMaps => "cm",
            Kind::HpaV2 | Kind::HpaV1 => "hpa",
            Kind::WidgetsV1 | Kind::WidgetsV1beta1 => "widget",
        }
    }

    /// The collection's path, in a namespace or across all.
    pub fn path(self, namespace: Option<&str>) -> String {
        let base = match self {
            Kind::ConfigMaps => "/api/v1",
            Kind::HpaV2 => "/apis/autoscaling/v2",
            Kind::HpaV1 => "/apis/autoscaling/v1",
            Kind::WidgetsV1 => "/apis/sim.kapi.dev/v1",
            Kind::WidgetsV1beta1 => "/apis/sim.kapi.dev/v1beta1",
        };
        match namespace {
            Some(ns) => format!("{base}/namespaces/{ns}/{}", self.resource()),
            None => format!("{base}/{}", self.resource()),
        }
    }

    pub fn resource(self) -> &'static str {
        match self {
            Kind::ConfigMaps => "configmaps",
            Kind::HpaV2 | Kind::HpaV1 => "horizontalpodautoscalers",
            Kind::WidgetsV1 | Kind::WidgetsV1beta1 => "widgets",
        }
    }

    pub fn api_version(self) -> &'static str {
        match self {
            Kind::ConfigMaps => "v1",
            Kind::HpaV2 => "autoscaling/v2",
            Kind::HpaV1 => "autoscaling/v1",
            Kind::WidgetsV1 => "sim.kapi.dev/v1",
            Kind::WidgetsV1beta1 => "sim.kapi.dev/v1beta1",
        }
    }

    /// The kind whose group version a path's leading segments (`api/v1`,
    /// `apis/autoscaling/v2`) name, and the segments after them.
    pub fn of_path<'a, 'b>(segs: &'a [&'b str]) -> Option<(Kind, &'a [&'b str])> {
        match segs {
            ["api", "v1", rest @ ..] => Some((Kind::ConfigMaps, rest)),
            ["apis", "autoscaling", "v2", rest @ ..] => Some((Kind::HpaV2, rest)),
            ["apis", "autoscaling", "v1", rest @ ..] => Some((Kind::HpaV1, rest)),
            ["apis", "sim.kapi.dev", "v1", rest @ ..] => Some((Kind::WidgetsV1, rest)),
            ["apis", "sim.kapi.dev", "v1beta1", rest @ ..] => Some((Kind::WidgetsV1beta1, rest)),
            _ => None,
        }
    }

    /// A new object named `name`, as a client writes it.
    pub fn object(self, name: &str, labels: Value, rng: &mut SimRng, by: &str) -> Value {
        let metadata = json!({"name": name, "labels": labels});
        let target = json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"});
        let max = rng.between(2, 20);
        let cpu = rng.between(10, 90);
        match self {
            Kind::ConfigMaps => {
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"v": rng.below(1000).to_string(), "by": by}})
            }
            Kind::HpaV2 => json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": metadata,
                "spec": {"scaleTargetRef": target, "minReplicas": 1, "maxReplicas": max,
                    "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": cpu}}}]}}),
            Kind::HpaV1 => json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": metadata,
                "spec": {"scaleTargetRef": target, "minReplicas": 1, "maxReplicas": max, "targetCPUUtilizationPercentage": cpu}}),
            Kind::WidgetsV1 | Kind::WidgetsV1beta1 => {
                let parts = json!([{"name": "main", "count": max}, {"name": by, "count": cpu}]);
                json!({"apiVersion": self.api_version(), "kind": "Widget", "metadata": metadata, "spec": {"size": max, "by": by, "parts": parts}})
            }
        }
    }

    /// An object changed as an update would change it.
    pub fn change(self, obj: &mut Value, rng: &mut SimRng, by: &str) {
        match self {
            Kind::ConfigMaps => {
                obj["data"]["v"] = json!(rng.below(1000).to_string());
                obj["data"]["by"] = json!(by);
            }
            Kind::HpaV2 | Kind::HpaV1 => obj["spec"]["maxReplicas"] = json!(rng.between(2, 20)),
            Kind::WidgetsV1 | Kind::WidgetsV1beta1 => {
                obj["spec"]["size"] = json!(rng.between(2, 20));
                obj["spec"]["by"] = json!(by);
            }
        }
    }

    /// A merge patch's body.
    pub fn patch(self, labels: Value, rng: &mut SimRng) -> Value {
        match self {
            Kind::ConfigMaps => json!({"metadata": {"labels": labels}, "data": {"v": rng.below(1000).to_string()}}),
            Kind::HpaV2 | Kind::HpaV1 => json!({"metadata": {"labels": labels}, "spec": {"maxReplicas": rng.between(2, 20)}}),
            Kind::WidgetsV1 | Kind::WidgetsV1beta1 => json!({"metadata": {"labels": labels}, "spec": {"size": rng.between(2, 20)}}),
        }
    }

    /// Why an object served for this collection is not in its version's form, if it is not:
    /// an answer must be converted to the version asked for, whatever version wrote it.
    pub fn misshapen(self, obj: &Value) -> Option<String> {
        let spec = &obj["spec"];
        match self {
            Kind::ConfigMaps => None,
            Kind::HpaV2 if spec.get("targetCPUUtilizationPercentage").is_some() => Some("a v1 field in a v2 object".into()),
            Kind::HpaV1 if spec.get("metrics").is_some() || spec.get("behavior").is_some() => Some("v2 fields in a v1 object".into()),
            Kind::HpaV2 if obj["metadata"]["annotations"].as_object().is_some_and(|a| a.keys().any(|k| k.starts_with("autoscaling.alpha.kubernetes.io/"))) => {
                Some("v1's round-trip annotations in a v2 object".into())
            }
            _ => None,
        }
    }
}
