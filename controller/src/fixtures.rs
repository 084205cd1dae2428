//! Values the unit tests of every module share.

pub use sitegrid_fakeapi::testing::labels;
