//! Sites as resources: NodeUnit and NodeGroup membership and the node
//! labels, annotations, taints and cordon they imply ([`membership`]), the
//! change to one node that touches only what sitegrid set there ([`plan`]),
//! every write of one pass of the controller ([`decide`]), and the shell
//! that watches and executes them ([`sync`]).

pub mod decide;
pub mod membership;
pub mod plan;
pub mod sync;
