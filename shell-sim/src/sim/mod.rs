//! The deterministic simulator (`../shared/DESIGN.md` §6): the core's machines in a seeded world
//! with virtual time, a faulty store, server restarts and many clients, checked after every step.
//!
//! A run is a function of its [`Config`]: the seed draws the [`Swarm`] options, the fault
//! schedule and every client action, so `kapi-sim --seed N` replays a run exactly and two runs
//! of one seed produce the same [`Report::digest`]. A run has a safety phase (faults on, until
//! the clients have sent `steps` requests) and a liveness phase (faults off, users quiet):
//! within [`LIVENESS_LIMIT`] every request must complete and every client's view must match the
//! store.

pub mod check;
pub mod clients;
pub mod kinds;
mod liveness;
pub mod oracle;
mod rng;
mod server;
mod setup;
mod store;
mod swarm;
mod webhooks;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};

use bytes::Bytes;
use jiff::{SignedDuration, Timestamp};
use kapi_core::bootstrap::{Bootstrap, BootstrapEffect};
use kapi_core::kv::Revision;
use kapi_core::pipeline::Request;

use check::authz::Policies;
use check::durability::Durability;
use check::list::Lists;
use check::watch::Watches;
use check::{Call, Invariant, Target as CallTarget, Violation, fail, parse_query};
use clients::controllers::ControllerClient;
use clients::{Client, Cx, Reply};
use rng::SimRng;
use server::{Catalogs, ServerOut, SimServer};
pub use store::Planted;
use store::{Store, StoreOut};
pub use swarm::Swarm;

use crate::{default_server, epoch};

/// A request from a client to the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReqId(pub u64);

/// Whom a store operation answers, in which incarnation of the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    pub epoch: u64,
    pub to: Target,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Request(ReqId),
    /// The watch cache in this slot.
    Cache(usize),
}

/// A watch cache's store watch stream, per server incarnation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct StreamId {
    pub epoch: u64,
    pub slot: usize,
}

/// How long the liveness phase may take to settle.
pub const LIVENESS_LIMIT: SignedDuration = SignedDuration::from_secs(120);
/// Lines of the event trace printed with a failure.
const TRACE: usize = 40;
/// The client index of the world's own setup requests.
const SETUP: usize = usize::MAX;
/// The client index of kapi's controllers.
const CONTROLLERS: usize = 0;
/// The most requests kapi's controllers have in flight in the simulated world.
const CONTROLLER_REQUESTS: usize = 16;

#[derive(Clone, Debug)]
pub struct Config {
    pub seed: u64,
    /// Requests the clients send in the safety phase.
    pub steps: u64,
    /// Bugs to plant (tests only).
    pub planted: Planted,
}

/// Why a run failed.
#[derive(Clone, Debug)]
pub enum Failure {
    /// The core panicked.
    Crash(String),
    Violation(Violation),
}

impl Failure {
    /// 2 for a crash, 3 for a correctness and 4 for a liveness violation.
    pub fn exit_code(&self) -> i32 {
        match self {
            Failure::Crash(_) => 2,
            Failure::Violation(v) => v.invariant.exit_code(),
        }
    }
}

/// The result of one run.
pub struct Report {
    pub seed: u64,
    pub swarm: Swarm,
    pub requests: u64,
    /// Virtual time the run covered.
    pub simulated: SignedDuration,
    /// A digest of every response and watch frame, in order: equal for two runs of a seed.
    pub digest: u64,
    pub failure: Option<Failure>,
    /// The last events before the end.
    pub trace: Vec<String>,
}

/// Runs one seed to its end or first failure.
pub fn run(config: &Config) -> Report {
    let mut sim = Simulation::new(config);
    let outcome = catch_unwind(AssertUnwindSafe(|| sim.run()));
    let failure = match outcome {
        Ok(Ok(())) => None,
        Ok(Err(v)) => Some(Failure::Violation(v)),
        Err(panic) => {
            let message = panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
            Some(Failure::Crash(message))
        }
    };
    Report {
        seed: config.seed,
        swarm: sim.swarm.clone(),
        requests: sim.sent,
        simulated: sim.now.duration_since(epoch()),
        digest: sim.digest.finish(),
        failure,
        trace: sim.trace.into(),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    Outage(SignedDuration),
    Restart,
    Compact,
}

/// A request in flight, as the world remembers it.
struct Sent {
    client: usize,
    tag: u64,
    call: Call,
    /// The newest catalog its client had been answered by when it was sent.
    catalog_seen: Option<Revision>,
    /// Likewise the newest policy.
    policy_seen: server::Policy,
}

struct Simulation {
    now: Timestamp,
    rng: SimRng,
    swarm: Swarm,
    steps: u64,
    store: Store,
    server: SimServer,
    clients: Vec<Box<dyn Client>>,
    wakes: BTreeSet<(Timestamp, usize)>,
    /// Each client's pending wake-up, to replace it when it asks for another.
    wake_of: BTreeMap<usize, Timestamp>,
    faults: BTreeSet<(Timestamp, Fault)>,
    outstanding: BTreeMap<ReqId, Sent>,
    /// The newest catalog each client has been answered by.
    catalogs_seen: BTreeMap<usize, Revision>,
    /// The newest policy each client has been answered by, and invariant 8's checks.
    policies: Policies,
    /// Open watch streams: who reads them.
    streams: BTreeMap<ReqId, (usize, u64)>,
    next_id: u64,
    sent: u64,
    calm: bool,
    /// The admission webhooks, in a world with them.
    webhooks: Option<webhooks::WebhookServers>,
    setup_reply: Option<(u16, Bytes)>,
    durability: Durability,
    lists: Lists,
    watches: Watches,
    digest: DefaultHasher,
    trace: VecDeque<String>,
}

impl Simulation {
    fn new(config: &Config) -> Simulation {
        let mut rng = SimRng::new(config.seed);
        let swarm = Swarm::draw(&mut rng, config.seed);
        let mut store = Store::new(swarm.calm(), rng.next_u64());
        store.planted = config.planted;
        let setup = if swarm.rbac_members > 0 { crate::server_authorizing("RBAC") } else { default_server() };
        let setup = if swarm.policy { crate::with_mutating_policies(setup) } else { setup };
        let now = epoch();
        let mut boot = Bootstrap::new(setup.server.clone(), &setup.served.catalog, "127.0.0.1", 6443, "10.0.0.1", rng.next_u64());
        while let Some(BootstrapEffect::Kv(req)) = boot.poll(now) {
            let r = store.apply_now(now, &req);
            boot.handle(now, r);
        }
        let token = setup.server.authenticator.loopback.clone().expect("the simulated server has a loopback token");
        let controllers = ControllerClient::new(&setup.served.catalog, &token, now, config.planted.blind_cleanup, swarm.quota.is_some());
        let mut sim_server = SimServer::new(setup, swarm.cache_history, swarm.watch_buffer);
        let hooks = swarm.webhooks.map(|t| webhooks::WebhookServers::new(t, config.seed ^ 0x5eed_0018, config.planted.open_webhooks));
        sim_server.stale_catalog = config.planted.stale_catalog;
        sim_server.stale_policy = config.planted.stale_policy;
        sim_server.kept_rbac_deletes = config.planted.kept_rbac_deletes;
        Simulation {
            now,
            rng,
            swarm,
            steps: config.steps,
            store,
            server: sim_server,
            clients: vec![Box::new(controllers)],
            wakes: BTreeSet::new(),
            wake_of: BTreeMap::new(),
            faults: BTreeSet::new(),
            outstanding: BTreeMap::new(),
            catalogs_seen: BTreeMap::new(),
            policies: Policies::default(),
            streams: BTreeMap::new(),
            next_id: 0,
            sent: 0,
            calm: false,
            webhooks: hooks,
            setup_reply: None,
            durability: Durability::default(),
            lists: Lists::default(),
            watches: Watches::default(),
            digest: DefaultHasher::new(),
            trace: VecDeque::new(),
        }
    }

    fn note(&mut self, line: impl FnOnce() -> String) {
        if self.trace.len() == TRACE {
            self.trace.pop_front();
        }
        let at = self.now.duration_since(epoch()).as_micros();
        self.trace.push_back(format!("{:>12}us {}", at, line()));
    }

    fn run(&mut self) -> Result<(), Violation> {
        self.set_wake(CONTROLLERS, self.now);
        for ns in self.namespaces().into_iter().skip(1) {
            let body = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            let (status, _) = self.setup(clients::request("POST", "/api/v1/namespaces", "", Some(&body), "application/json"))?;
            if status != 201 {
                return Err(fail(Invariant::Response, format!("creating namespace {ns} answered {status}")));
            }
        }
        self.serve_widgets()?;
        self.limit_configmaps()?;
        self.admit_by_webhooks()?;
        self.admit_by_policy()?;
        self.store.set_faults(self.swarm.clone());
        self.add_clients();
        self.schedule_faults();
        while self.sent < self.steps {
            if !self.step()? {
                return Err(fail(Invariant::Liveness, "the world stopped: nothing left to happen".into()));
            }
        }
        self.liveness()
    }

    fn set_wake(&mut self, client: usize, at: Timestamp) {
        if let Some(old) = self.wake_of.insert(client, at) {
            self.wakes.remove(&(old, client));
        }
        self.wakes.insert((at, client));
    }

    /// Sends a request of the world's own and runs until it is answered.
    fn setup(&mut self, req: Request) -> Result<(u16, Bytes), Violation> {
        self.send(SETUP, 0, req);
        while self.setup_reply.is_none() {
            if !self.step()? {
                return Err(fail(Invariant::Liveness, "a setup request was never answered".into()));
            }
        }
        Ok(self.setup_reply.take().expect("checked above"))
    }

    /// Advances to the next moment something happens and lets everything due then act;
    /// `false` when nothing is left to happen.
    fn step(&mut self) -> Result<bool, Violation> {
        // Requests sent from outside a step have effects to hand out first.
        self.drain()?;
        let webhooks = self.webhooks.as_ref().and_then(webhooks::WebhookServers::poll_timeout);
        let next = [self.store.poll_timeout(), self.server.poll_timeout(), self.wakes.first().map(|w| w.0), self.faults.first().map(|f| f.0), webhooks]
            .into_iter()
            .flatten()
            .min();
        let Some(next) = next else { return Ok(false) };
        self.now = self.now.max(next);
        while let Some((at, fault)) = self.faults.first().copied().filter(|(t, _)| *t <= self.now) {
            self.faults.remove(&(at, fault));
            self.fault(fault);
        }
        loop {
            let mut busy = false;
            while let Some(out) = self.store.poll(self.now) {
                busy = true;
                match out {
                    StoreOut::Reply { ticket, result } => self.server.store_reply(self.now, ticket, result),
                    StoreOut::Watch { stream, resp } => self.server.store_watch(self.now, stream, Some(resp)),
                    StoreOut::Broken { stream } => self.server.store_watch(self.now, stream, None),
                }
                self.drain()?;
            }
            while let Some((id, answers)) = self.webhooks.as_mut().and_then(|w| w.poll(self.now)) {
                busy = true;
                self.note(|| format!("#{} <- the webhooks' answers", id.0));
                self.server.called(self.now, id, answers);
                self.drain()?;
            }
            self.server.tick(self.now);
            busy |= self.drain()?;
            while let Some((at, c)) = self.wakes.first().copied().filter(|(t, _)| *t <= self.now) {
                busy = true;
                self.wakes.remove(&(at, c));
                self.wake_of.remove(&c);
                self.wake(c)?;
            }
            if !busy {
                break;
            }
        }
        self.bounded()?;
        Ok(true)
    }

    fn fault(&mut self, fault: Fault) {
        match fault {
            Fault::Outage(d) if !self.calm => {
                self.note(|| format!("store outage for {}ms", d.as_millis()));
                self.store.outage(self.now, self.now + d);
            }
            Fault::Restart if !self.calm => {
                self.note(|| "server restart".into());
                self.server.restart();
            }
            Fault::Compact => {
                self.store.compact(self.now, self.swarm.compaction_keep);
                let rev = self.store.model.compact_revision();
                self.note(|| format!("compacted to {rev}"));
                if let Some(every) = self.swarm.compaction {
                    self.faults.insert((self.now + every, Fault::Compact));
                }
            }
            _ => {}
        }
    }

    /// Routes the server's outputs until it has none; reports whether there were any.
    fn drain(&mut self) -> Result<bool, Violation> {
        let mut any = false;
        while let Some(out) = self.server.poll() {
            any = true;
            let now = self.now;
            match out {
                ServerOut::Calls { id, calls } => match self.webhooks.as_mut() {
                    Some(w) => w.call(now, id, &calls)?,
                    None => self.server.called(now, id, calls.iter().map(|_| Err("dial tcp: connect: connection refused".into())).collect()),
                },
                ServerOut::Kv { ticket, req } => self.store.submit(now, ticket, req),
                ServerOut::Watch { stream, req } => self.store.watch(now, stream, req),
                ServerOut::Progress { stream } => self.store.progress(now, stream),
                ServerOut::CancelWatch { stream } => self.store.cancel(stream),
                ServerOut::Response { id, head, body, catalogs, policy } => self.answered(id, head.status, body, catalogs, policy)?,
                ServerOut::WatchOpened { id, head, catalogs, policy } => self.opened(id, head.status, catalogs, policy)?,
                ServerOut::Frame { id, frame } => self.frame(id, frame)?,
                ServerOut::WatchClosed { id } => self.closed(id)?,
                ServerOut::Disconnected { id } => {
                    if let Some(s) = self.outstanding.remove(&id) {
                        self.note(|| format!("#{} disconnected", id.0));
                        self.deliver(s.client, s.tag, Reply::Disconnected)?;
                    }
                }
            }
        }
        Ok(any)
    }

    fn send(&mut self, client: usize, tag: u64, req: Request) {
        self.next_id += 1;
        let id = ReqId(self.next_id);
        if client != SETUP {
            self.sent += 1;
            if self.sent == self.steps {
                self.calm_down();
            }
        }
        let call = Call {
            caller: client,
            method: req.method.clone(),
            target: CallTarget::parse(&req.path),
            query: parse_query(&req.query),
            body: serde_json::from_slice(&req.body).unwrap_or_default(),
            start: self.store.oracle.revision(),
            end: 0,
            acked_before: self.durability.max_acked,
            faulty: !self.calm,
            catalogs: Catalogs::default(),
            member: clients::rbac::MEMBERS.iter().position(|m| req.header("Authorization") == Some(&format!("Bearer {}", m.token))),
            policy: server::Policy::default(),
            quota: self.swarm.quota,
            webhooks: self.swarm.webhooks.is_some(),
            admission_policy: self.swarm.policy,
        };
        let who = if client == SETUP { "setup".to_string() } else { self.clients[client].name() };
        self.note(|| format!("#{} {who} {} {}?{}", id.0, req.method, req.path, req.query));
        let slow = client != SETUP && self.clients[client].slow();
        let seed = self.rng.next_u64();
        let catalog_seen = self.catalogs_seen.get(&client).copied();
        let policy_seen = self.policies.seen(client);
        self.outstanding.insert(id, Sent { client, tag, call, catalog_seen, policy_seen });
        self.server.request(self.now, id, req, seed, slow);
    }

    /// The safety phase is over: faults stop, users stop writing.
    fn calm_down(&mut self) {
        self.calm = true;
        self.store.set_faults(self.swarm.calm());
        if let Some(w) = &mut self.webhooks {
            w.calm = true;
        }
        self.store.outage(self.now, self.now);
        self.note(|| "faults off: liveness phase".into());
    }

    fn wake(&mut self, client: usize) -> Result<(), Violation> {
        if self.clients[client].slow() {
            let mine: Vec<(ReqId, u64)> = self.streams.iter().filter(|(_, (c, _))| *c == client).map(|(id, (_, tag))| (*id, *tag)).collect();
            for (id, _) in mine {
                let (frames, ended) = self.server.read(self.now, id, 4);
                for f in frames {
                    self.frame(id, f)?;
                }
                if ended {
                    self.closed(id)?;
                }
            }
        }
        self.with_client(client, |c, cx| c.wake(cx));
        Ok(())
    }

    fn deliver(&mut self, client: usize, tag: u64, reply: Reply) -> Result<(), Violation> {
        if client == SETUP {
            if let Reply::Response { status, body } = reply {
                self.setup_reply = Some((status, body));
            }
            return Ok(());
        }
        self.with_client(client, |c, cx| c.reply(tag, reply, cx));
        Ok(())
    }

    /// Lets a client act, then carries out what it asked for.
    fn with_client(&mut self, client: usize, f: impl FnOnce(&mut dyn Client, &mut Cx)) {
        let mut cx = Cx::new(self.now, &mut self.rng, self.calm);
        f(self.clients[client].as_mut(), &mut cx);
        let Cx { sends, hang_ups, wake, .. } = cx;
        self.act(client, sends, hang_ups, wake);
    }

    fn act(&mut self, client: usize, sends: Vec<(u64, Request)>, hang_ups: Vec<u64>, wake: Option<Timestamp>) {
        for (tag, req) in sends {
            self.send(client, tag, req);
        }
        for tag in hang_ups {
            let ids: Vec<ReqId> = self.streams.iter().filter(|(_, s)| **s == (client, tag)).map(|(id, _)| *id).collect();
            for id in ids {
                self.streams.remove(&id);
                self.server.hang_up(self.now, id);
            }
        }
        if let Some(at) = wake {
            let at = self.wake_of.get(&client).map_or(at, |w| at.min(*w));
            self.set_wake(client, at);
        }
    }

    fn answered(&mut self, id: ReqId, status: u16, body: Bytes, catalogs: Catalogs, policy: server::Policy) -> Result<(), Violation> {
        let Some(mut s) = self.outstanding.remove(&id) else { return Ok(()) };
        status.hash(&mut self.digest);
        body.hash(&mut self.digest);
        s.call.end = self.store.oracle.revision();
        s.call.catalogs = catalogs;
        s.call.policy = policy;
        self.catalog_not_older(&s)?;
        // A refusal by admission comes after authorization allowed the request.
        let parsed = serde_json::from_slice(&body).unwrap_or_default();
        let admitted = check::quota::refused(&s.call, status, &parsed)
            || check::webhooks::refused(&s.call, status, &parsed)
            || check::response::not_ready(&s.call, status, &parsed);
        let authorized = if admitted { 200 } else { status };
        self.policies.answered(&s.call, authorized, s.policy_seen, &self.store.oracle)?;
        self.note(|| format!("#{} -> {status} {}", id.0, String::from_utf8_lossy(&body[..body.len().min(160)])));
        let oracle = &self.store.oracle;
        let v = check::response::answered(&s.call, status, &body, oracle)?;
        if (200..300).contains(&status) && s.call.target.is_some() {
            self.durability.answered(&s.call, &v, oracle)?;
            check::concurrency::answered(&s.call, &v, oracle)?;
            check::quota::answered(&s.call, status, &v, oracle)?;
            check::webhooks::answered(&s.call, status, &v, self.webhooks.as_ref())?;
            check::webhooks::admitted_by_policy(&s.call, status, &v)?;
            self.lists.answered(&s.call, &v, oracle)?;
        }
        self.deliver(s.client, s.tag, Reply::Response { status, body })
    }

    fn opened(&mut self, id: ReqId, status: u16, catalogs: Catalogs, policy: server::Policy) -> Result<(), Violation> {
        let Some(mut s) = self.outstanding.remove(&id) else { return Ok(()) };
        s.call.catalogs = catalogs;
        s.call.policy = policy;
        self.policies.answered(&s.call, status, s.policy_seen, &self.store.oracle)?;
        self.catalog_not_older(&s)?;
        self.note(|| format!("#{} -> watch {status}", id.0));
        if status != 200 {
            return Err(fail(Invariant::Response, format!("a watch stream opened with status {status}")));
        }
        self.watches.opened(id.0, &s.call);
        self.streams.insert(id, (s.client, s.tag));
        self.deliver(s.client, s.tag, Reply::WatchOpened)
    }

    fn frame(&mut self, id: ReqId, frame: Bytes) -> Result<(), Violation> {
        let Some(&(client, tag)) = self.streams.get(&id) else { return Ok(()) };
        frame.hash(&mut self.digest);
        self.note(|| format!("#{} <- {}", id.0, String::from_utf8_lossy(&frame[..frame.len().min(120)])));
        self.watches.frame(id.0, &frame, &self.store.oracle)?;
        self.deliver(client, tag, Reply::Frame(frame))
    }

    fn closed(&mut self, id: ReqId) -> Result<(), Violation> {
        let Some((client, tag)) = self.streams.remove(&id) else { return Ok(()) };
        self.note(|| format!("#{} closed", id.0));
        self.watches.closed(id.0, &self.store.oracle, self.store.oracle.revision())?;
        self.deliver(client, tag, Reply::WatchClosed)
    }

    /// Invariant 7: no request is served by a catalog older than one its client had already
    /// been answered by (a restarted server answers "server is starting" until it has the CRDs
    /// again, never with fewer of them).
    fn catalog_not_older(&mut self, s: &Sent) -> Result<(), Violation> {
        let Some(served) = s.call.catalogs.start else { return Ok(()) };
        if s.catalog_seen.is_some_and(|seen| served < seen) {
            return Err(fail(
                Invariant::Catalog,
                format!("{} was served by the catalog of CRD revision {served}, after an answer by that of {:?}", s.call.method, s.catalog_seen),
            ));
        }
        let seen = self.catalogs_seen.entry(s.client).or_default();
        *seen = (*seen).max(served);
        Ok(())
    }
}
