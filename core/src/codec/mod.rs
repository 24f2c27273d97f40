//! Wire formats: JSON, YAML and Kubernetes protobuf, and the media types that select them.

pub mod protobuf;
