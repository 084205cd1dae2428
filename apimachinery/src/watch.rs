//! Watch events: what happened to an object, as a watch frame's `type` spells it.

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// The object appeared (created, or newly visible).
    Added,
    /// The object changed.
    Modified,
    /// The object is gone; the event carries its last state.
    Deleted,
}

impl EventType {
    /// The watch frame's `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}
