//! kapi's own controllers as one more client of the simulated server: the core's controller
//! machine (the apiextensions controllers: names, `Established`, the cleanup finalizer; the
//! aggregator's local APIServices and availability), its requests sent through the world
//! like everyone's, with the world's latency, faults and restarts. Built-in controllers that
//! work on namespaces are off, as the simulated clients make none; the resourcequota
//! controller runs in a world with quotas.

use jiff::{SignedDuration, Timestamp};
use kapi_core::controllers::{ControllerEffect, ControllerEvent, Controllers, Enabled, RequestId};

use super::{Client, Cx, Reply};
use crate::SIM_CA;

pub struct ControllerClient {
    machine: Controllers,
    /// A planted bug: every list of widgets the controllers get is empty.
    blind_cleanup: bool,
    /// The requests that list widgets, by tag.
    widget_lists: std::collections::BTreeSet<u64>,
}

impl ControllerClient {
    /// The controllers of a server whose loopback token is `token`.
    pub fn new(catalog: &kapi_core::catalog::Catalog, token: &str, now: Timestamp, blind_cleanup: bool, quotas: bool) -> ControllerClient {
        let enabled = Enabled { resource_quota: quotas, ..Enabled::NONE };
        ControllerClient { machine: Controllers::new(enabled, catalog, token, SIM_CA, now), blind_cleanup, widget_lists: Default::default() }
    }

    /// Sends what the machine asks for, and wakes when it next has work.
    fn drive(&mut self, cx: &mut Cx) {
        while let Some(effect) = self.machine.poll(cx.now) {
            match effect {
                ControllerEffect::Request { id, request } => {
                    if self.blind_cleanup && request.method == "GET" && request.path.ends_with("/widgets") {
                        self.widget_lists.insert(id.0);
                    }
                    cx.send(id.0, request)
                }
                // The world runs no extension servers: none can be reached.
                ControllerEffect::Probe { id, .. } => {
                    self.machine.handle(cx.now, ControllerEvent::Failed { id, error: "dial tcp: connect: connection refused".into() })
                }
                // Only an extension server's answer says what it serves.
                ControllerEffect::Discovered { .. } => {}
            }
        }
        if let Some(at) = self.machine.poll_timeout() {
            cx.wake_in(at.duration_since(cx.now).max(SignedDuration::from_micros(1)));
        }
    }
}

impl Client for ControllerClient {
    fn name(&self) -> String {
        "controllers".into()
    }

    fn wake(&mut self, cx: &mut Cx) {
        self.drive(cx);
    }

    fn reply(&mut self, tag: u64, reply: Reply, cx: &mut Cx) {
        let id = RequestId(tag);
        let reply = match reply {
            Reply::Response { status: 200, body } if self.widget_lists.remove(&tag) => {
                let mut list: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                list["items"] = serde_json::json!([]);
                Reply::Response { status: 200, body: serde_json::to_vec(&list).unwrap_or_default().into() }
            }
            other => other,
        };
        let events = match reply {
            Reply::Response { status, body } => {
                vec![ControllerEvent::Head { id, status }, ControllerEvent::Body { id, chunk: body }, ControllerEvent::End { id }]
            }
            Reply::WatchOpened => vec![ControllerEvent::Head { id, status: 200 }],
            Reply::Frame(chunk) => vec![ControllerEvent::Body { id, chunk }],
            // A connection that broke before its answer ends it with no status: the machine
            // tries again as after a failed request.
            Reply::WatchClosed | Reply::Disconnected => vec![ControllerEvent::End { id }],
        };
        for e in events {
            self.machine.handle(cx.now, e);
        }
        self.drive(cx);
    }
}
