//! The subcommands, one module each.

pub(crate) mod doctor;
pub(crate) mod export;
pub(crate) mod generate;
pub(crate) mod list;
pub(crate) mod run;
pub(crate) mod serve;
pub(crate) mod show;
pub(crate) mod test;
pub(crate) mod validate;
