//! sitegrid-apimachinery's integration tests: the protobuf encoding against
//! kube-apiserver 1.20's own answers (`tests/golden/`, captured with
//! `deploy/e2e/capture-protobuf.sh`).

mod protobuf;
