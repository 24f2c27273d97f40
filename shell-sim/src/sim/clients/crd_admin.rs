//! A cluster administrator who changes the widgets' CustomResourceDefinition while the other
//! clients use the widgets: a new schema (a property more or less), a third version served or
//! withdrawn, the storage version moved between v1 and v1beta1, and the CRD deleted with its
//! widgets still there (kapi's cleanup finalizer deletes them first) and made again later. In
//! the liveness phase it makes the CRD again if it is gone, so that every client's view of the
//! widgets can settle.

use jiff::SignedDuration;
use serde_json::{Value, json};

use super::{Client, Cx, Reply, request};
use crate::sim::kinds::Kind;

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

#[derive(Debug, PartialEq, Eq)]
enum Asked {
    Nothing,
    /// Read the CRD, to change it (or, after a delete, to see whether it is gone).
    Read {
        then: Then,
    },
    Write {
        method: &'static str,
    },
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Then {
    Change,
    Delete,
    /// Only look.
    Look,
}

pub struct CrdAdmin {
    asked: Asked,
    /// The CRD exists, as last seen.
    exists: bool,
    /// It is being deleted, as last seen (or asked for).
    deleting: bool,
    tag: u64,
}

impl Default for CrdAdmin {
    /// The widgets' CRD exists at the start.
    fn default() -> CrdAdmin {
        CrdAdmin { asked: Asked::Nothing, exists: true, deleting: false, tag: 0 }
    }
}

impl CrdAdmin {
    fn read(&mut self, cx: &mut Cx, then: Then) {
        self.asked = Asked::Read { then };
        self.send(cx, "GET", &Self::path(), None);
    }

    fn write(&mut self, cx: &mut Cx, method: &'static str, path: &str, body: Option<&Value>) {
        self.asked = Asked::Write { method };
        self.send(cx, method, path, body);
    }

    fn send(&mut self, cx: &mut Cx, method: &str, path: &str, body: Option<&Value>) {
        self.tag += 1;
        cx.send(self.tag, request(method, path, "", body, "application/json"));
    }

    fn path() -> String {
        format!("{CRDS}/{}", Kind::widgets_crd()["metadata"]["name"].as_str().unwrap_or_default())
    }

    /// One change of the CRD's spec, drawn.
    fn change(crd: &mut Value, cx: &mut Cx) {
        let versions = crd["spec"]["versions"].as_array_mut().map(std::mem::take).unwrap_or_default();
        let mut versions: Vec<Value> = versions;
        match cx.rng.below(3) {
            0 => {
                // A property more or less in every version's schema.
                for v in &mut versions {
                    let props = &mut v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
                    if let Some(p) = props.as_object_mut()
                        && p.remove("note").is_none()
                    {
                        p.insert("note".into(), json!({"type": "string"}));
                    }
                }
            }
            1 => {
                // A third version, served, not stored; or withdrawn again.
                if versions.iter().any(|v| v["name"] == "v2") {
                    versions.retain(|v| v["name"] != "v2");
                } else if let Some(first) = versions.first() {
                    let mut v2 = first.clone();
                    v2["name"] = json!("v2");
                    v2["storage"] = json!(false);
                    versions.push(v2);
                }
            }
            _ => {
                // The storage version moves between v1 and v1beta1.
                let to = if versions.iter().any(|v| v["name"] == "v1" && v["storage"] == true) { "v1beta1" } else { "v1" };
                for v in &mut versions {
                    v["storage"] = json!(v["name"] == to);
                }
            }
        }
        crd["spec"]["versions"] = Value::Array(versions);
    }
}

impl Client for CrdAdmin {
    fn name(&self) -> String {
        "crd-admin".into()
    }

    fn wake(&mut self, cx: &mut Cx) {
        if self.asked == Asked::Nothing {
            if !self.exists {
                self.write(cx, "POST", CRDS, Some(&Kind::widgets_crd()));
            } else if self.deleting {
                self.read(cx, Then::Look);
            } else if !cx.calm {
                let then = if cx.rng.chance(0.3) { Then::Delete } else { Then::Change };
                self.read(cx, then);
            }
        }
        let pause = SignedDuration::from_micros(cx.rng.between(100_000, 1_500_000) as i64);
        cx.wake_in(pause);
    }

    fn reply(&mut self, _tag: u64, reply: Reply, cx: &mut Cx) {
        let asked = std::mem::replace(&mut self.asked, Asked::Nothing);
        let Reply::Response { status, body } = reply else { return };
        match (asked, status) {
            (Asked::Read { .. }, 404) => (self.exists, self.deleting) = (false, false),
            (Asked::Read { then }, 200) => {
                let Ok(mut crd) = serde_json::from_slice::<Value>(&body) else { return };
                self.deleting = crd["metadata"]["deletionTimestamp"].is_string();
                match then {
                    _ if self.deleting => {}
                    Then::Look => {}
                    Then::Delete => self.write(cx, "DELETE", &Self::path(), None),
                    Then::Change => {
                        Self::change(&mut crd, cx);
                        self.write(cx, "PUT", &Self::path(), Some(&crd));
                    }
                }
            }
            (Asked::Write { method: "POST" }, 201) => (self.exists, self.deleting) = (true, false),
            // Still there, being deleted.
            (Asked::Write { method: "POST" }, 409) => (self.exists, self.deleting) = (true, true),
            (Asked::Write { method: "DELETE" }, 200) => self.deleting = true,
            _ => {}
        }
    }
}
