//! Keeping a grid's status small enough for the API server.
//!
//! `status.states` holds one entry per site, 300 to 700 bytes each (a
//! workload's counts and conditions, and the controller's own condition when
//! the site failed). etcd refuses an object over 1.5 MiB, and the grid also
//! holds its spec and the server-side apply `managedFields`, which list every
//! key of `states` again. Thousands of sites would make the status write fail
//! on every resync and leave the status stale forever. So the controller
//! writes at most [`STATES_BUDGET`] bytes of `states`: failing sites first
//! (they are the ones a user must read), then the others in site order, and
//! says so with a [`STATES_CONDITION`]`=False` grid condition (reason
//! `Truncated`). `sites` and `readySites` still count every site, and every
//! site's workload is applied all the same.

use serde_json::{Map, Value};

use super::{reason, set_grid_condition, SITE_CONDITION};

/// The most bytes `status.states` may take, serialized: about 1,000 sites
/// whose workloads report two conditions, a third of what etcd accepts, which
/// leaves room for the spec and the managed fields.
pub const STATES_BUDGET: usize = 512 * 1024;

/// The grid condition present (`False`) while `status.states` lists only some sites.
pub const STATES_CONDITION: &str = "StatesComplete";

/// How much of `states` a trimmed status kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trimmed {
    /// Sites listed.
    pub kept: usize,
    /// Sites the grid has.
    pub total: usize,
}

/// Trims `status.states` to `budget` bytes and sets or clears the
/// [`STATES_CONDITION`] condition; returns what was kept if anything was cut.
///
/// Linear in the number of sites, plus one sort.
pub fn fit_states(
    status: &mut Value,
    previous: Option<&Value>,
    budget: usize,
    now: &str,
) -> Option<Trimmed> {
    let trimmed = trim(status, budget);
    let condition = trimmed.map(|t| {
        (
            "False",
            reason::TRUNCATED,
            format!(
                "status.states lists {} of {} sites, failing sites first: all of them would take \
                 the grid's status past the {} KiB the controller allows it (the API server \
                 refuses objects over 1.5 MiB); sites and readySites count every site, and every \
                 site's workload is applied",
                t.kept,
                t.total,
                budget / 1024
            ),
        )
    });
    set_grid_condition(status, previous, STATES_CONDITION, condition, now);
    trimmed
}

fn trim(status: &mut Value, budget: usize) -> Option<Trimmed> {
    let states = status.get_mut("states")?.as_object_mut()?;
    // `"key":value,` per entry.
    let cost = |key: &str, value: &Value| key.len() + value.to_string().len() + 4;
    let total_bytes: usize = states.iter().map(|(k, v)| cost(k, v)).sum();
    if total_bytes <= budget {
        return None;
    }
    let total = states.len();
    let failing = |v: &Value| {
        v.get("conditions")
            .and_then(Value::as_array)
            .is_some_and(|list| {
                list.iter()
                    .any(|c| c.get("type").and_then(Value::as_str) == Some(SITE_CONDITION))
            })
    };
    let mut order: Vec<(bool, String, Value, usize)> = std::mem::take(states)
        .into_iter()
        .map(|(k, v)| {
            let size = cost(&k, &v);
            (!failing(&v), k, v, size)
        })
        .collect();
    order.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let mut used = 0;
    let mut kept = Map::new();
    for (_, key, value, size) in order {
        if used + size <= budget {
            used += size;
            kept.insert(key, value);
        }
    }
    // Listed in site order, like an untrimmed status.
    kept.sort_keys();
    let trimmed = Trimmed {
        kept: kept.len(),
        total,
    };
    *states = kept;
    Some(trimmed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status(sites: usize, failing: &[usize]) -> Value {
        let states: Map<String, Value> = (0..sites)
            .map(|i| {
                let mut state = json!({"replicas": 1, "readyReplicas": 1});
                if failing.contains(&i) {
                    state["conditions"] = json!([{"type": SITE_CONDITION, "status": "False"}]);
                }
                (format!("site-{i:05}"), state)
            })
            .collect();
        json!({"states": states, "sites": sites, "readySites": sites})
    }

    #[test]
    fn a_status_that_fits_is_untouched_and_has_no_condition() {
        let mut s = status(10, &[]);
        let before = s.clone();
        assert_eq!(fit_states(&mut s, None, STATES_BUDGET, "T1"), None);
        assert_eq!(s, before);
    }

    #[test]
    fn an_oversized_status_keeps_failing_sites_first_and_says_so() {
        let mut s = status(10_000, &[9_999, 5_000]);
        let trimmed = fit_states(&mut s, None, 64 * 1024, "T1").unwrap();
        assert_eq!(trimmed.total, 10_000);
        assert!(trimmed.kept > 100 && trimmed.kept < 10_000, "{trimmed:?}");
        let states = s["states"].as_object().unwrap();
        assert_eq!(states.len(), trimmed.kept);
        assert!(states.contains_key("site-09999") && states.contains_key("site-05000"));
        assert!(states.contains_key("site-00000"));
        assert!(s["states"].to_string().len() <= 64 * 1024);
        assert_eq!(s["sites"], 10_000);
        let condition = &s["conditions"][0];
        assert_eq!(condition["type"], STATES_CONDITION);
        assert_eq!(condition["status"], "False");
        assert_eq!(condition["reason"], reason::TRUNCATED);
        let message = condition["message"].as_str().unwrap();
        assert!(message.contains(&format!("lists {} of 10000 sites", trimmed.kept)));

        // The next resync computes the same status (time carried over), and
        // once the sites fit the condition goes.
        let mut again = status(10_000, &[9_999, 5_000]);
        fit_states(&mut again, Some(&s), 64 * 1024, "T2");
        assert_eq!(again, s);
        let mut small = status(10, &[]);
        assert_eq!(fit_states(&mut small, Some(&s), 64 * 1024, "T3"), None);
        assert!(small.get("conditions").is_none());
    }
}
