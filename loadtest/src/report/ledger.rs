//! The ledger of churn changes: for each watched object, the sequence numbers
//! written to it in order. Watchers judge what they received against it: a
//! sequence number skipped between two they saw is a missed event, one seen
//! twice a duplicate, one written after the last they saw and never received
//! by the end a missed event too.

use std::collections::HashMap;

use parking_lot::RwLock;

/// Objects' keys (`namespace/name`) and the sequence numbers written to each.
#[derive(Debug)]
pub struct Ledger {
    index: HashMap<String, usize>,
    keys: Vec<String>,
    seqs: RwLock<Vec<Vec<u64>>>,
}

impl Ledger {
    /// A ledger for `keys` (`namespace/name`), none written yet.
    pub fn new(keys: Vec<String>) -> Self {
        let index = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.clone(), i))
            .collect();
        let seqs = RwLock::new(vec![Vec::new(); keys.len()]);
        Ledger { index, keys, seqs }
    }

    /// The id of the object `namespace/name`, None if the ledger does not track it.
    pub fn id(&self, namespace: &str, name: &str) -> Option<usize> {
        self.index.get(&format!("{namespace}/{name}")).copied()
    }

    /// The objects tracked.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when no object is tracked.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key of object `id`.
    pub fn key(&self, id: usize) -> Option<&str> {
        self.keys.get(id).map(String::as_str)
    }

    /// Notes that `seq` is about to be written to `id`. Called before the
    /// write, so a watcher that receives `seq` finds every earlier one here.
    pub fn record(&self, id: usize, seq: u64) {
        if let Some(v) = self.seqs.write().get_mut(id) {
            v.push(seq);
        }
    }

    /// How many sequence numbers were written to `id` strictly between
    /// `after` and `before`: the events a watcher that saw both skipped.
    pub fn between(&self, id: usize, after: u64, before: u64) -> u64 {
        let seqs = self.seqs.read();
        let Some(v) = seqs.get(id) else { return 0 };
        let lo = v.partition_point(|s| *s <= after);
        let hi = v.partition_point(|s| *s < before);
        hi.saturating_sub(lo) as u64
    }

    /// How many sequence numbers were written to `id` after `after`.
    pub fn after(&self, id: usize, after: u64) -> u64 {
        let seqs = self.seqs.read();
        let Some(v) = seqs.get(id) else { return 0 };
        (v.len() - v.partition_point(|s| *s <= after)) as u64
    }

    /// The last sequence number written to `id` (0: none).
    pub fn last(&self, id: usize) -> u64 {
        self.seqs
            .read()
            .get(id)
            .and_then(|v| v.last().copied())
            .unwrap_or(0)
    }

    /// Changes written in all.
    pub fn written(&self) -> u64 {
        self.seqs.read().iter().map(|v| v.len() as u64).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_and_tails_are_counted_from_the_written_sequence() {
        let ledger = Ledger::new(vec!["default/a".into(), "default/b".into()]);
        for seq in [1, 3, 4, 9] {
            ledger.record(0, seq);
        }
        ledger.record(1, 2);
        assert_eq!(ledger.id("default", "b"), Some(1));
        assert_eq!(ledger.id("default", "c"), None);
        assert_eq!(ledger.between(0, 1, 9), 2, "3 and 4 lie between 1 and 9");
        assert_eq!(ledger.between(0, 0, 1), 0);
        assert_eq!(ledger.after(0, 3), 2);
        assert_eq!(ledger.after(0, 9), 0);
        assert_eq!(ledger.last(0), 9);
        assert_eq!(ledger.last(1), 2);
        assert_eq!(ledger.written(), 5);
    }
}
