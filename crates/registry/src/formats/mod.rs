//! The tool formats: how a file says what tool it is and how it is run.
//!
//! One module per format ([`kodelet`], [`ikigai`], [`manifest`]), each owning its probe
//! commands, the parser of what the probe printed and the command that runs a call. This
//! module declares what they share: the [`Format`](format::Format) of a tool with its
//! protocols and the runner a loaded tool keeps ([`format`]), the annotations a tool declares
//! ([`annotations`]), and the declared test cases ([`declared_tests`]).
//!
//! Rule: nothing here imports `crate::discovery` or `crate::call`; discovery and calls use
//! the formats, never the other way round (`cargo xtask tidy` checks it).

pub(crate) mod annotations;
#[cfg(test)]
mod bad_input;
pub(crate) mod declared_tests;
pub(crate) mod format;
pub(crate) mod ikigai;
pub(crate) mod kodelet;
pub(crate) mod manifest;
pub(crate) mod package_runner;
