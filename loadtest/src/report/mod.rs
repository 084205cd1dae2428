//! `sitegrid-report`: issue 17's benchmark. Scenarios against a release
//! sitegrid-proxy process and, for comparison, directly against the same
//! in-memory upstream; the results as Markdown with PNG charts and a goals
//! table.
//!
//! Layout: [`churn`] writes open-loop changes stamped with their send time,
//! [`probe`] runs list-then-watch watchers that time and check every event
//! against the churn's [`ledger`], [`scenarios`] put them together with a
//! proxy process ([`env`]), [`model`] holds the figures, [`goals`] judges
//! them, [`markdown`] and [`charts`] write them out, [`external`] runs k6
//! and wrk when installed.

pub mod charts;
pub mod churn;
pub mod env;
pub mod external;
pub mod faults;
pub mod frame;
pub mod goals;
pub mod ledger;
pub mod machine;
pub mod markdown;
pub mod model;
pub mod probe;
pub mod profile;
pub mod scenarios;
pub mod stamp;
