//! sitegrid-controller: DeploymentGrid, StatefulSetGrid and ServiceGrid reconcilers.
//!
//! Not built yet: the controller issue fills this crate. It exists so the
//! workspace has its final shape from the start.
