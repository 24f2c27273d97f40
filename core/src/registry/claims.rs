//! A new object's pool claims (a Service's cluster IPs and node ports): each value is taken
//! by creating its own key, the next candidate tried when one is taken; the values go into the
//! object once all are held, and are given back when the write fails.

use std::collections::VecDeque;

use bytes::Bytes;
use serde_json::Value;

use super::{Phase, WriteOp, WriteOutcome, storage_error};
use crate::meta;
use crate::schema::normalize::format_time;
use crate::status::ApiError;
use crate::storage::{Outcome, StorageError, StorageOp, StorageRequest};

impl WriteOp {
    /// Tries the current candidate of the current claim, or moves on.
    pub(super) fn claim_next(&mut self) {
        let Phase::Claiming { obj, claims, index, attempt, granted } = &mut self.phase else { return };
        if *index == claims.len() {
            let mut obj = obj.clone();
            let values = std::mem::take(granted);
            self.res.strategy.grant(&mut obj, &values);
            self.write_new(obj);
            return;
        }
        let claim = &claims[*index];
        match claim.candidates.get(*attempt) {
            Some(value) => {
                let key = Bytes::from(format!("{}/{}/{value}", self.ctx.prefix, claim.pool));
                let mut record = claim.record.clone();
                if record.get("metadata").is_some() {
                    meta::set_meta(&mut record, "name", Value::String(value.clone()));
                    meta::set_meta(&mut record, "uid", Value::String(self.rng.uuid()));
                    meta::set_meta(&mut record, "creationTimestamp", Value::String(format_time(self.ctx.now, false)));
                }
                let record = Bytes::from(serde_json::to_vec(&record).expect("JSON trees serialize"));
                self.storage = Some(StorageOp::new(StorageRequest::Create { key, value: record, ttl_seconds: None }));
            }
            None => {
                let err = claim.taken.clone();
                self.release(Err(err));
            }
        }
    }

    pub(super) fn claim_answered(&mut self, result: Result<Outcome, StorageError<ApiError>>) {
        let Phase::Claiming { claims, index, attempt, granted, .. } = &mut self.phase else { return };
        match result {
            Ok(Outcome::Created(kv)) => {
                let value = claims[*index].candidates.get(*attempt).unwrap_or_default();
                granted.push(value);
                self.claimed.push(kv.key);
                *index += 1;
                *attempt = 0;
            }
            Err(StorageError::AlreadyExists) => *attempt += 1,
            other => {
                let gr = self.res.info.group_resource();
                let err = match other {
                    Err(e) => storage_error(e, &gr, ""),
                    Ok(o) => ApiError::internal(format!("unexpected storage outcome {o:?}")),
                };
                self.release(Err(err));
                return;
            }
        }
        self.claim_next();
    }

    /// Gives back `self.claimed`, then answers.
    pub(super) fn release(&mut self, answer: Result<WriteOutcome, ApiError>) {
        let keys: VecDeque<Bytes> = std::mem::take(&mut self.claimed).into();
        self.phase = Phase::Releasing { keys, answer };
        self.release_next();
    }

    pub(super) fn release_next(&mut self) {
        let Phase::Releasing { keys, answer } = &mut self.phase else { return };
        match keys.pop_front() {
            Some(key) => self.storage = Some(StorageOp::new(StorageRequest::Mutate { key, cached: None, dry_run: false })),
            None => {
                let answer = std::mem::replace(answer, Err(ApiError::internal("answered twice")));
                self.phase = Phase::Done;
                self.done = Some(answer);
            }
        }
    }
}
