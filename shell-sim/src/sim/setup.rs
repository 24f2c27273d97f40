//! The world's start: its namespaces, the widgets' CRD (established by kapi's controllers),
//! the clients the swarm draws, and the faults it schedules.

use jiff::SignedDuration;

use super::check::selector::Selector;
use super::check::{self, Invariant, Violation, fail};
use super::clients::crd_admin::CrdAdmin;
use super::clients::informer::{Informer, Role};
use super::clients::rbac::{Member, RbacAdmin};
use super::clients::user::User;
use super::kinds::{self, Kind};
use super::{Fault, Simulation, clients};

impl Simulation {
    pub(super) fn namespaces(&self) -> Vec<String> {
        let mut ns = vec!["default".to_string()];
        ns.extend((1..self.swarm.namespaces).map(|i| format!("sim-{i}")));
        ns
    }

    /// Creates the widgets' CRD and waits until the server serves both its versions (kapi's
    /// controllers establish it).
    pub(super) fn serve_widgets(&mut self) -> Result<(), Violation> {
        const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
        let (status, _) = self.setup(clients::request("POST", CRDS, "", Some(&Kind::widgets_crd()), "application/json"))?;
        if status != 201 {
            return Err(fail(Invariant::Response, format!("creating the widgets' CRD answered {status}")));
        }
        let deadline = self.now + SignedDuration::from_secs(10);
        while !(self.server.serves(kinds::WIDGETS_GROUP, "v1", "widgets") && self.server.serves(kinds::WIDGETS_GROUP, "v1beta1", "widgets")) {
            if !self.step()? || self.now > deadline {
                return Err(fail(Invariant::Liveness, "the widgets' CRD was never established".into()));
            }
        }
        Ok(())
    }

    /// In a world with quotas: gives every namespace its ResourceQuota of configmaps and waits
    /// until kapi's resourcequota controller has counted each (a quota is enforced from then).
    pub(super) fn limit_configmaps(&mut self) -> Result<(), Violation> {
        let Some(hard) = self.swarm.quota else { return Ok(()) };
        for ns in self.namespaces() {
            let quota = serde_json::json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": check::quota::QUOTA},
                "spec": {"hard": {"count/configmaps": hard.to_string()}}});
            let path = format!("/api/v1/namespaces/{ns}/resourcequotas");
            let (status, _) = self.setup(clients::request("POST", &path, "", Some(&quota), "application/json"))?;
            if status != 201 {
                return Err(fail(Invariant::Response, format!("creating the quota of {ns} answered {status}")));
            }
            let deadline = self.now + SignedDuration::from_secs(10);
            loop {
                let (_, body) = self.setup(clients::request("GET", &format!("{path}/{}", check::quota::QUOTA), "", None, ""))?;
                let quota: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                if quota["status"]["used"]["count/configmaps"].is_string() {
                    break;
                }
                if self.now > deadline {
                    return Err(fail(Invariant::Liveness, format!("the quota of {ns} was never counted")));
                }
                if !self.step()? {
                    return Err(fail(Invariant::Liveness, "the world stopped while quotas were counted".into()));
                }
            }
        }
        Ok(())
    }

    /// In a world with admission webhooks: configures them and waits until the server admits
    /// by them.
    pub(super) fn admit_by_webhooks(&mut self) -> Result<(), Violation> {
        let Some(configurations) = self.webhooks.as_ref().map(|w| w.configurations()) else { return Ok(()) };
        for (path, body) in configurations {
            let (status, _) = self.setup(clients::request("POST", path, "", Some(&body), "application/json"))?;
            if status != 201 {
                return Err(fail(Invariant::Response, format!("creating a webhook configuration answered {status}")));
            }
        }
        let deadline = self.now + SignedDuration::from_secs(10);
        while !self.server.admits_by_webhooks() {
            if !self.step()? || self.now > deadline {
                return Err(fail(Invariant::Liveness, "the webhook configurations were never taken in".into()));
            }
        }
        Ok(())
    }

    /// In a world with the admission policy: creates it and its binding, and waits until the
    /// server admits by them.
    pub(super) fn admit_by_policy(&mut self) -> Result<(), Violation> {
        if !self.swarm.policy {
            return Ok(());
        }
        for (path, body) in check::webhooks::policy() {
            let (status, _) = self.setup(clients::request("POST", path, "", Some(&body), "application/json"))?;
            if status != 201 {
                return Err(fail(Invariant::Response, format!("creating the admission policy answered {status}")));
            }
        }
        let deadline = self.now + SignedDuration::from_secs(10);
        while !self.server.admits_by_policy(check::webhooks::POLICY) {
            if !self.step()? || self.now > deadline {
                return Err(fail(Invariant::Liveness, "the admission policy was never taken in".into()));
            }
        }
        Ok(())
    }

    pub(super) fn add_clients(&mut self) {
        let namespaces = self.namespaces();
        if self.swarm.crd_churn {
            self.clients.push(Box::new(CrdAdmin::default()));
        }
        if self.swarm.rbac_members > 0 {
            self.clients.push(Box::new(RbacAdmin::new(namespaces.clone())));
        }
        for person in 0..self.swarm.rbac_members {
            self.clients.push(Box::new(Member::new(person, namespaces.clone())));
        }
        for i in 0..self.swarm.users {
            self.clients.push(Box::new(User::new(i, namespaces.clone(), self.swarm.names)));
        }
        let roles = [(Role::Controller, self.swarm.controllers), (Role::Watcher, self.swarm.watchers), (Role::SlowWatcher, self.swarm.slow_watchers)];
        for (role, n) in roles {
            for i in 0..n {
                let ns = if self.rng.chance(0.5) { None } else { Some(self.rng.pick(&namespaces).clone()) };
                let selector = Selector::draw(&mut self.rng);
                let initial = self.rng.chance(0.5);
                let kind = *self.rng.pick(&Kind::ALL);
                self.clients.push(Box::new(Informer::new(i, role, kind, ns, selector, initial)));
            }
        }
        for c in 0..self.clients.len() {
            let at = self.now + SignedDuration::from_micros(self.rng.below(10_000) as i64);
            self.set_wake(c, at);
        }
    }

    /// Spreads outages and restarts over the expected length of the safety phase.
    pub(super) fn schedule_faults(&mut self) {
        let span = (self.steps / (self.swarm.users.max(1) as u64)).max(1) * 10_000;
        for _ in 0..self.swarm.outages {
            let at = self.now + SignedDuration::from_micros(self.rng.below(span) as i64);
            let d = SignedDuration::from_millis(self.rng.between(200, 10_000) as i64);
            self.faults.insert((at, Fault::Outage(d)));
        }
        for _ in 0..self.swarm.restarts {
            let at = self.now + SignedDuration::from_micros(self.rng.below(span) as i64);
            self.faults.insert((at, Fault::Restart));
        }
        if let Some(every) = self.swarm.compaction {
            self.faults.insert((self.now + every, Fault::Compact));
        }
    }
}
