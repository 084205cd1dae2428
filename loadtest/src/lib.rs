//! In-memory Kubernetes API server (being written).
