//! kapi-core: every rule of the Kubernetes API server as pure state machines, with no I/O.
//!
//! See `ARCHITECTURE.md` at the repository root for the map of modules and how a request flows.

pub mod codec;
pub mod kv;
pub mod meta;
pub mod quantity;
pub mod schema;
pub mod selector;
pub mod status;
pub mod storage;
pub mod validation;
