//! sitegrid-dnsd: per-site DNS records for StatefulSetGrid pods.
//!
//! Not built yet: a later issue fills this crate. It exists so the workspace
//! has its final shape from the start.
