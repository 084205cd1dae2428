//! sitegrid-proxy (being written).
