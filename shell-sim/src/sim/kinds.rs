//! The collections the simulated clients work on: configmaps, and horizontalpodautoscalers, one
//! stored object served at two versions (autoscaling/v2, its storage version, and v1 converted
//! on the way in and out), so that every invariant also holds across a conversion, in LISTs,
//! watches and writes alike.

use serde_json::{Value, json};

use super::rng::SimRng;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    ConfigMaps,
    HpaV2,
    HpaV1,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::ConfigMaps, Kind::HpaV2, Kind::HpaV1];

    /// The collection's path, in a namespace or across all.
    pub fn path(self, namespace: Option<&str>) -> String {
        let base = match self {
            Kind::ConfigMaps => "/api/v1",
            Kind::HpaV2 => "/apis/autoscaling/v2",
            Kind::HpaV1 => "/apis/autoscaling/v1",
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
        }
    }

    pub fn api_version(self) -> &'static str {
        match self {
            Kind::ConfigMaps => "v1",
            Kind::HpaV2 => "autoscaling/v2",
            Kind::HpaV1 => "autoscaling/v1",
        }
    }

    /// The kind whose group version a path's leading segments (`api/v1`,
    /// `apis/autoscaling/v2`) name, and the segments after them.
    pub fn of_path<'a, 'b>(segs: &'a [&'b str]) -> Option<(Kind, &'a [&'b str])> {
        match segs {
            ["api", "v1", rest @ ..] => Some((Kind::ConfigMaps, rest)),
            ["apis", "autoscaling", "v2", rest @ ..] => Some((Kind::HpaV2, rest)),
            ["apis", "autoscaling", "v1", rest @ ..] => Some((Kind::HpaV1, rest)),
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
        }
    }

    /// A merge patch's body.
    pub fn patch(self, labels: Value, rng: &mut SimRng) -> Value {
        match self {
            Kind::ConfigMaps => json!({"metadata": {"labels": labels}, "data": {"v": rng.below(1000).to_string()}}),
            Kind::HpaV2 | Kind::HpaV1 => json!({"metadata": {"labels": labels}, "spec": {"maxReplicas": rng.between(2, 20)}}),
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
