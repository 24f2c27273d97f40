//! kapi-core: every rule of the Kubernetes API server as pure state machines, with no I/O.
//!
//! See `ARCHITECTURE.md` at the repository root for the map of modules and how a request flows.

pub mod admission;
pub mod aggregator;
pub mod answers;
pub mod apiextensions;
pub mod audit;
pub mod auth;
pub mod authz;
pub mod bootstrap;
pub mod cache;
pub mod catalog;
pub mod cel;
pub mod codec;
pub mod config_file;
pub mod controllers;
pub mod discovery;
pub mod features;
pub mod kv;
pub mod meta;
pub mod openapi;
pub mod patch;
pub mod pipeline;
pub mod quantity;
pub mod quota;
pub mod rand;
pub mod registry;
pub mod resources;
pub mod schema;
pub mod selector;
pub mod serviceaccount;
pub mod ssa;
pub mod status;
pub mod storage;
pub mod table;
pub mod validation;
pub mod webhook;
