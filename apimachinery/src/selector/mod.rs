//! Label and field selectors (being written).
