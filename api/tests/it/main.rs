//! sitegrid-api's integration tests, one binary: the generated CRDs match
//! the committed ones and have the names, scope and schemas users rely on.

mod crds;
