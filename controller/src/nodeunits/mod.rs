//! Sites as resources (issue 10, in progress): NodeUnit and NodeGroup
//! membership and the node labels, annotations, taints and cordon they
//! imply ([`membership`]), and the change to one node that touches only
//! what sitegrid set there ([`plan`]). The reconciler that applies them is
//! not built yet.

pub mod membership;
pub mod plan;
