//! Calls: validating a call's arguments, running the tool through the executor and mapping
//! the outcome to an envelope ([`invoke`]), who the call is ([`identity`]), its progress
//! reports ([`progress`]), the audit log ([`audit`]), the runner of a tool's declared tests
//! ([`declared_tests`]), the declaration learned from them ([`learn`]) and the preparation of a tool started by a package runner
//! ([`prepare`]).
//!
//! Rule: a call may use the formats (to build a tool's command) and discovery (to answer a
//! Kodelet tool's pending `config`); neither imports anything from here (`cargo xtask tidy`
//! checks it).

pub(crate) mod audit;
pub(crate) mod declared_tests;
pub(crate) mod egress;
pub(crate) mod identity;
pub(crate) mod invoke;
pub(crate) mod learn;
pub(crate) mod prepare;
pub(crate) mod progress;
pub(crate) mod reads;
pub(crate) mod secrets;
pub(crate) mod writes;
